"""Bytes per second of a download, over its last few seconds (what a download line shows)."""

from __future__ import annotations

import time
from collections import deque
from typing import Callable

WINDOW_S = 5.0


class TransferRate:
    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._seen: deque[tuple[float, int]] = deque()

    def rate(self, done: int) -> float | None:
        """Record `done` bytes now; the speed since the oldest sample of the window, or None
        before there are two samples (or when the count went back: another file started)."""
        now = self._clock()
        if self._seen and done < self._seen[-1][1]:
            self._seen.clear()
        self._seen.append((now, done))
        while len(self._seen) > 2 and now - self._seen[0][0] > WINDOW_S:
            self._seen.popleft()
        (t0, d0), (t1, d1) = self._seen[0], self._seen[-1]
        return (d1 - d0) / (t1 - t0) if t1 > t0 else None
