"""How many threads a decode uses while other processes want the cores: fewer, as long as they do.

Measured here (2 cores, the 1.5B target, `run --drafter none -n 64`, one other process busy on a
core the whole time, 2 interleaved rounds; /tmp probe, figures in bench/measured/
vm-20261125-thread-share.md, its last section): 2 spinning threads 13.9-14.3 tok/s, 2 sleeping threads 17.8-17.9,
1 thread 19.5-20.2 under either wait. With the cores idle, 2 threads make 27-28 tok/s and 1 about
20. A decode's threads meet at a barrier after every operation, so one preempted thread holds up
the other: while something else runs, the thread it would preempt is better not started. The
wait level (thread_wait.py) is read once, when libgomp loads; the thread count can change between
decodes (llama_set_n_threads), so this is how a long-running `serve` follows a machine that gets
busy after it started, and gets its threads back when the other work ends.

Every PERIOD_S, before a decode, this reads the CPU time of every process (/proc/stat) and of this
one (/proc/self/stat): what the others used is the difference. The cap is the cores they leave,
rounding what they use down by MARGIN_CORES (a browser tab does not cost a thread), and moves only
after CONFIRM periods agree (a compiler's short burst does not either). Where /proc is not there
(macOS, whose llama.cpp threadpool is not OpenMP's), there is no cap.
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from typing import Callable

from specllama.llama.cpu_load import cpu_times, stat_ticks

PERIOD_S = 1.0
CONFIRM = 2
MARGIN_CORES = 0.5
KEPT_CHANGES = 64


def own_ticks() -> int | None:
    """Scheduler ticks this process (all its threads) has run, user and system; None without /proc."""
    return stat_ticks("/proc/self/stat")


def cores_left(others: float, cores: int) -> int:
    """The threads worth running while other processes use `others` cores' time: at least one."""
    return max(1, cores - max(0, math.ceil(others - MARGIN_CORES)))


class ThreadShare:
    """The most threads a decode should use now (`cap()`), followed as other processes come and go."""

    def __init__(self, cores: int | None = None, *, read_all: Callable = cpu_times, read_own: Callable = own_ticks,
                 clock: Callable[[], float] = time.monotonic, cpus: int | None = None):
        self.cores = cores or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
        self.cpus = cpus or os.cpu_count() or self.cores  # what /proc/stat's totals add up
        self._read_all, self._read_own, self._clock = read_all, read_own, clock
        self.now = self.cores
        self.others = 0.0  # cores' worth other processes used over the last period
        # (time, new cap, others' cores), the latest few: a server that runs for weeks beside a
        # machine whose load comes and goes must not keep every change it ever made.
        self.changes: deque[tuple[float, int, float]] = deque(maxlen=KEPT_CHANGES)
        self._last: tuple[float, tuple[int, int], int] | None = None
        self._pending, self._agreed = self.cores, 0
        self.enabled = read_all() is not None and read_own() is not None
        self.say: Callable[[str], None] | None = None  # told each change (a -v status line)

    def cap(self) -> int:
        """The thread cap for a decode starting now: cheap (a clock read) except once a period."""
        if not self.enabled:
            return self.cores
        t = self._clock()
        if self._last is not None and t - self._last[0] < PERIOD_S:
            return self.now
        all_now, own_now = self._read_all(), self._read_own()
        if all_now is None or own_now is None:
            return self.now
        if self._last is not None:
            _, all_then, own_then = self._last
            total = all_now[1] - all_then[1]
            if total > 0:
                mine = own_now - own_then
                self.others = max(0.0, self.cpus * ((all_now[0] - all_then[0]) - mine) / total)
                self._follow(cores_left(self.others, self.cores), t)
        self._last = (t, all_now, own_now)
        return self.now

    def _follow(self, want: int, t: float) -> None:
        if want == self.now:
            self._pending, self._agreed = want, 0
            return
        self._agreed = self._agreed + 1 if want == self._pending else 1
        self._pending = want
        if self._agreed >= CONFIRM:
            if self.say is not None:
                self.say(f"decoding with {want} thread(s), not {self.now}: other processes used {self.others:.1f} "
                         f"of {self.cores} cores' time")
            self.now, self._agreed = want, 0
            self.changes.append((t, want, self.others))


_share: ThreadShare | None = None


def current() -> ThreadShare | None:
    """The process's ThreadShare when threads follow the machine (thread wait `auto`), else None."""
    return _share


def follow_machine(on: bool) -> None:
    """Start (or stop) following other processes' use of the cores for every decode of this process."""
    global _share
    _share = ThreadShare() if on else None
