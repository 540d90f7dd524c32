"""How llama.cpp's worker threads wait between the operations of a decode: the one place that says.

A one-token decode of the 1.5B target is hundreds of small operations, each ending at a barrier of
the CPU threads. The Linux and Windows wheels are built with OpenMP, whose barriers follow the
OMP_WAIT_POLICY / GOMP_SPINCOUNT environment read once, when libgomp loads (at `import llama_cpp`):
a sleeping thread pays a futex wake-up at every barrier. Measured on this project's 2-core machine
(scripts/measure/thread_wait.py, bench/measured/vm-20261125-thread-wait): OMP_WAIT_POLICY=PASSIVE
decodes ~25 % slower than a thread that spins a little before it sleeps, which is what llama.cpp's
own tools run with (libgomp's default). macOS builds have no OpenMP: llama.cpp's own threadpool
polls there whatever this module says.

Levels, chosen per command before llama.cpp loads (`configure`), overridable with --thread-wait or
SPECLLAMA_THREAD_WAIT, and never over a user's own OMP_WAIT_POLICY / GOMP_SPINCOUNT:

  spin   threads spin up to SPIN_COUNT iterations (about a millisecond) at a barrier, then sleep:
         full speed when the cores are ours, and a bounded loss when another process takes one
  sleep  threads sleep at once (OMP_WAIT_POLICY=PASSIVE): for a machine busy with other work,
         where a spinning thread would steal the time the other work needs

This module imports nothing from llama_cpp: it must run before the library loads.
"""

from __future__ import annotations

import os
import sys

from specllama.errors import UsageError

LEVELS = ("spin", "sleep")
DEFAULT_LEVEL = "spin"
ENV = "SPECLLAMA_THREAD_WAIT"
# libgomp counts about 100,000 spins a millisecond; its own default (no OMP_WAIT_POLICY) is
# 300,000 and OMP_WAIT_POLICY=ACTIVE 30 billion. Measured here, 30,000 and 300,000 decode alike;
# the shorter one gives a core back sooner to the UI and to a neighbour.
SPIN_COUNT = 30_000
_USER_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
# Set beside the variables this module wrote, so a child process (a server a test starts, a batch
# worker) can tell its parent's level from the user's own variables and choose its own.
_MARK = "SPECLLAMA_THREAD_WAIT_APPLIED"

_chosen: str | None = None  # the level configure() applied; None: not yet


def environment_for(level: str) -> dict[str, str]:
    """The OpenMP variables a level sets."""
    if level == "spin":
        return {"GOMP_SPINCOUNT": str(SPIN_COUNT)}
    if level == "sleep":
        return {"OMP_WAIT_POLICY": "PASSIVE"}
    raise UsageError(f"unknown thread wait level {level!r} (--thread-wait or ${ENV}): choose one of {', '.join(LEVELS)}")


def user_set() -> bool:
    """Whether the user set OpenMP's own variables: theirs win over any level."""
    return _MARK not in os.environ and any(name in os.environ for name in _USER_VARS)


def configure(level: str | None = None) -> str:
    """Apply a level (None: SPECLLAMA_THREAD_WAIT, else the default) before llama.cpp loads, and
    return what is in force: the level, "user" (the user's own OpenMP variables), or "fixed" when
    llama.cpp was already loaded (the first choice stands: libgomp read its environment once)."""
    global _chosen
    level = level or os.environ.get(ENV) or DEFAULT_LEVEL
    wanted = environment_for(level)  # an unknown level fails here, in one line
    if user_set() and _chosen is None:
        _chosen = "user"
        return _chosen
    if "llama_cpp" in sys.modules:
        return _chosen or "fixed"
    for name in _USER_VARS:  # a later configure() in the same process (tests) replaces the earlier level
        os.environ.pop(name, None)
    os.environ.update(wanted)
    os.environ[_MARK] = level
    _chosen = level
    return level


def ensure_configured() -> str:
    """The level in force, applying the default first when no command chose one (the library
    used from Python, the tests)."""
    return configure() if _chosen is None else in_force()


def in_force() -> str:
    """What the threads do, for reports: "spin", "sleep", or the user's OpenMP variables."""
    if _chosen in LEVELS:
        return _chosen
    given = ", ".join(f"{name}={os.environ[name]}" for name in _USER_VARS if name in os.environ)
    return given or "OpenMP default"
