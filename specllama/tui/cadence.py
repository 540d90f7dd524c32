"""Paint a streaming answer as often as the UI's CPU budget allows, and never leave its end unshown.

A streaming answer changes ~10 times a second (one message per flush, streaming.py), the side panel
with it. Each paint costs the UI thread two layout passes and a compositor pass over the whole
screen (Textual re-lays out the auto-sized message once more after its size changes), and a code
block is re-rendered in full: 20-40 ms here, more as the block grows. On two cores every millisecond
of it comes out of llama.cpp's time, so:
- the answer and the panel are painted together, in one frame;
- a change that comes too soon after a paint waits for a timer (one at most), which paints whatever
  is latest by then;
- the gap between paints follows what the UI thread really spends: at each paint the share of one
  core it used since the last one is compared with `budget`, and the gap grows or shrinks in
  proportion (between `interval` and MAX_GAP). A long code block or a big terminal paints less
  often instead of slowing the model down; a fast machine paints at `interval`.
With a core to spare beside llama.cpp's threads (`spare_core`), the UI takes nothing from them and
the app paints at `interval` whatever it costs.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Awaitable, Callable

from textual.message_pump import MessagePump
from textual.timer import Timer

MAX_GAP = 1.5  # seconds: slower than this does not read as streaming any more


def spare_core(threads: int) -> bool:
    """Whether this process may run on more cores than llama.cpp's threads use."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores > threads


class Cadence:
    def __init__(self, owner: MessagePump, interval: float, paint: Callable[[], Awaitable[None]],
                 budget: float | None = None, clock: Callable[[], float] = time.monotonic,
                 cpu_clock: Callable[[], float] = time.thread_time):
        self._owner = owner
        self.interval = interval  # the shortest gap between paints
        self.budget = budget  # share of one core the UI thread may use while painting; None: fixed gap
        self.gap = interval
        self._paint = paint
        self._clock, self._cpu_clock = clock, cpu_clock
        self._painted_at = float("-inf")  # clock() of the last paint
        self._cpu_at = 0.0  # cpu_clock() then
        self._timer: Timer | None = None

    async def changed(self) -> None:
        """Something to show: paint now if the last paint is old enough, else when it will be."""
        if self._timer is not None:
            return  # the pending paint will show this change too
        wait = self._painted_at + self.gap - self._clock()
        if wait > 0:
            self._timer = self._owner.set_timer(wait, self._timed_paint)
        else:
            await self._paint_now()

    async def _timed_paint(self) -> None:
        self._timer = None
        await self._paint_now()

    async def _paint_now(self) -> None:
        now, cpu = self._clock(), self._cpu_clock()
        if self.budget is not None and math.isfinite(self._painted_at):  # not an answer's first paint
            share = (cpu - self._cpu_at) / (now - self._painted_at)
            self.gap = min(max(self.gap * share / self.budget, self.interval), MAX_GAP)
        self._painted_at, self._cpu_at = now, cpu
        await self._paint()

    def cancel(self) -> None:
        """No pending paint (the caller shows the final state itself); the next change paints at
        once. The gap learnt is kept: the next answer is likely to cost about the same."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._painted_at = float("-inf")
