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

  spin   threads spin SPIN_COUNT PAUSEs at a barrier before they sleep: full speed while the cores
         are ours. But when anything else runs on a core our threads use, every barrier waits for a
         preempted thread: measured here beside other work (load 8-10), 0.8-1.8 tok/s against
         12-15 asleep, whatever our priority (nice -15 too)
  sleep  threads sleep at once (OMP_WAIT_POLICY=PASSIVE): ~25 % slower on an idle machine, and
         the one that holds up on a busy one
  auto   (the default) spin when the cores the threads will use are idle as the command starts
         (other processes' CPU time over AUTO_WINDOW_S, from /proc/stat), else sleep; where that
         cannot be read (macOS, which has no OpenMP build anyway), spin. And afterwards, decode
         with fewer threads while other processes want the cores (thread_share.py)

This module imports nothing from llama_cpp: it must run before the library loads.
"""

from __future__ import annotations

import os
import sys
import time

from specllama.errors import UsageError
from specllama.llama import thread_share
from specllama.llama.cpu_load import busy_cores, cpu_times

LEVELS = ("auto", "spin", "sleep")
DEFAULT_LEVEL = "auto"
ENV = "SPECLLAMA_THREAD_WAIT"
# GOMP_SPINCOUNT counts PAUSE instructions (~60 ns each on this AMD EPYC; libgomp's own default is
# 300,000, OMP_WAIT_POLICY=ACTIVE 30 billion). First measured here (bench/measured/vm-20261125-thread-wait,
# -busy): 1,000 and 30,000 decode alike on idle cores (23.2 tok/s), and beside one other busy
# process 1,000 kept 10.5 tok/s where 30,000 fell to 1-3; so 1,000 it was. Measured again with
# llama-server beside it at its own default (bench/measured/vm-20261126-thread-wait-long-spin, 3 rounds
# x 3 prompts interleaved): 1,000 made 28.1 tok/s (0.957x of llama-server), 300,000 29.6 (1.008x);
# llama-server itself made 30.7 with 1,000 against 32.5 with its default. A short spin lets the
# threads fall asleep in the gap between two decodes (a token's Python), and waking them costs ~5 %.
# libgomp's own count it is, what llama.cpp's tools run with. A busy machine is `auto`'s to handle:
# it sleeps when the cores are busy at the start and decodes with fewer threads when they get busy
# later (thread_share.py), so no two of our threads wait for each other on a shared core.
SPIN_COUNT = 300_000
_USER_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
# Set beside the variables this module wrote, so a child process (a server a test starts, a batch
# worker) can tell its parent's level from the user's own variables and choose its own.
_MARK = "SPECLLAMA_THREAD_WAIT_APPLIED"

AUTO_WINDOW_S = 0.2  # how long `auto` watches the machine: 20 scheduler ticks a core
# `auto` spins only when other processes used at most this many cores' time beyond the cores our
# threads leave free: a background browser tab, not a build or another model.
AUTO_BUSY_CORES = 0.25

_chosen: str | None = None  # the level configure() applied; None: not yet
_reason = ""  # why `auto` chose what it chose, for reports


def environment_for(level: str) -> dict[str, str]:
    """The OpenMP variables a level sets (`auto` once it has chosen)."""
    if level == "spin":
        return {"GOMP_SPINCOUNT": str(SPIN_COUNT)}
    if level == "sleep":
        return {"OMP_WAIT_POLICY": "PASSIVE"}
    raise UsageError(f"unknown thread wait level {level!r} (--thread-wait or ${ENV}): choose one of {', '.join(LEVELS)}")


def user_set() -> bool:
    """Whether the user set OpenMP's own variables: theirs win over any level."""
    return _MARK not in os.environ and any(name in os.environ for name in _USER_VARS)


def decide(busy: float, cores: int, threads: int) -> str:
    """`auto`'s choice: spin when what else runs fits on the cores our threads leave free."""
    return "spin" if busy <= max(0, cores - threads) + AUTO_BUSY_CORES else "sleep"


def _auto(threads: int | None) -> str:
    global _reason
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    before = cpu_times()
    if before is None:
        _reason = "no /proc/stat"
        return "spin"
    time.sleep(AUTO_WINDOW_S)
    busy = busy_cores(before, cpu_times() or before, os.cpu_count() or cores)
    level = decide(busy, cores, threads or cores)
    _reason = f"{busy:.1f} of {cores} cores busy elsewhere"
    return level


def configure(level: str | None = None, threads: int | None = None) -> str:
    """Apply a level (None: SPECLLAMA_THREAD_WAIT, else the default) before llama.cpp loads, and
    return what is in force: the level, "user" (the user's own OpenMP variables), or "fixed" when
    llama.cpp was already loaded (the first choice stands: libgomp read its environment once).
    `threads`: how many llama.cpp will use (None: every core), which `auto` weighs."""
    global _chosen, _reason
    level = level or os.environ.get(ENV) or DEFAULT_LEVEL
    if level not in LEVELS:
        raise UsageError(f"unknown thread wait level {level!r} (--thread-wait or ${ENV}): choose one of {', '.join(LEVELS)}")
    if user_set() and _chosen is None:
        _chosen = "user"
        return _chosen
    if "llama_cpp" in sys.modules:
        return _chosen or "fixed"
    _reason = ""
    thread_share.follow_machine(level == "auto")  # `auto` also follows the machine after the start
    if level == "auto":
        level = _auto(threads)
    for name in _USER_VARS:  # a later configure() in the same process (tests) replaces the earlier level
        os.environ.pop(name, None)
    os.environ.update(environment_for(level))
    os.environ[_MARK] = level
    _chosen = level
    return level


def ensure_configured() -> str:
    """The level in force, applying the default first when no command chose one (the library
    used from Python, the tests)."""
    return configure() if _chosen is None else in_force()


def key() -> str:
    """What the threads do, for the cost cache's key: the level alone (an `auto` reason differs
    run to run, and costs learnt under one level serve every run under it)."""
    return _chosen if _chosen in LEVELS else in_force()


def in_force() -> str:
    """What the threads do, for reports: "spin", "sleep" (with `auto`'s reason), or the user's
    OpenMP variables."""
    if _chosen in LEVELS:
        return f"{_chosen} (auto: {_reason})" if _reason else _chosen
    given = ", ".join(f"{name}={os.environ[name]}" for name in _USER_VARS if name in os.environ)
    return given or "OpenMP default"
