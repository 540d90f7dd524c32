"""Which servers are in rotation: exponential backoff with jitter, Retry-After, and one probe at a
time to find out whether a server that failed answers again.

A server that fails an attempt (refused, timed out, 429, 5xx, garbage) leaves the rotation for a
cool-down that doubles with each consecutive failure. Its workers stop taking prompts meanwhile, so
the other servers' workers take them all. When the cool-down is over, one worker sends the next
prompt as the probe: an answer puts the server back for all its workers, a failure starts a longer
cool-down. Requests already in flight when the server went down do not count again: four workers
whose connections all break together are one failure, not four.

Times are passed in (`now`, time.monotonic()), so the schedule is tested without sleeping.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Callable

# A server's Retry-After is honoured up to this; beyond it the number is more likely a mistake.
MAX_RETRY_AFTER = 600.0
# How often a worker waiting for another worker's probe looks again.
PROBE_POLL = 0.05


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 5  # further attempts of one prompt after its first (on any server)
    base: float = 1.0  # first cool-down, seconds
    cap: float = 60.0  # longest cool-down


def backoff_delay(failures: int, policy: RetryPolicy, rng: Callable[[], float] = random.random) -> float:
    """Cool-down after `failures` consecutive failures (>= 1): base * 2**(failures-1), at most cap,
    of which the upper half is random ("equal jitter"): it still grows, and servers or workers that
    failed together do not all come back in the same instant."""
    full = min(policy.cap, policy.base * 2 ** min(failures - 1, 60))
    return full / 2 + rng() * full / 2


class ServerHealth:
    """In or out of rotation, shared by the worker threads of one server."""

    def __init__(self, policy: RetryPolicy, rng: Callable[[], float] = random.random):
        self.policy = policy
        self._rng = rng
        self._lock = threading.Lock()
        self.failures = 0  # consecutive failed attempts (cool-downs), 0 while the server answers
        self.down_since: float | None = None  # None: in rotation
        self.down_until = 0.0
        self._changed = float("-inf")  # when the server last left or rejoined the rotation
        self._probing = False
        self.refused: str | None = None  # why the server refused our API key: out for good

    @property
    def in_rotation(self) -> bool:
        return self.down_since is None

    def acquire(self, now: float) -> tuple[float, bool]:
        """(seconds to wait before asking again, 0 to go ahead; whether the attempt is the probe).
        A worker that goes ahead as the probe and then sends nothing must call `abandon`."""
        with self._lock:
            if self.down_since is None:
                return 0.0, False
            if now < self.down_until:
                return self.down_until - now, False
            if self._probing:
                return PROBE_POLL, False
            self._probing = True
            return 0.0, True

    def abandon(self, probe: bool) -> None:
        if probe:
            with self._lock:
                self._probing = False

    def succeeded(self, started: float) -> bool:
        """An attempt begun at `started` was answered; True when that puts the server back."""
        with self._lock:
            if self.down_since is None:
                self.failures = 0
                return False
            if started < self._changed:
                return False  # began before the failure that took the server out: says nothing new
            self.failures, self.down_since, self._probing, self._changed = 0, None, False, started
            return True

    def failed(self, started: float, now: float, retry_after: float | None = None) -> float | None:
        """An attempt begun at `started` failed at `now`; the cool-down it starts, or None when the
        server was already taken out by a failure after this attempt began."""
        with self._lock:
            if started < self._changed:
                return None  # began before the server last went down or came back: old news
            self.failures += 1
            delay = backoff_delay(self.failures, self.policy, self._rng)
            if retry_after is not None:
                delay = max(delay, min(retry_after, MAX_RETRY_AFTER))
            self.down_since, self.down_until, self._probing, self._changed = now, now + delay, False, now
            return delay

    def refuse(self, why: str) -> bool:
        """The server refused the API key: no prompt of this batch goes to it again. True the
        first time (one report per server, however many of its workers heard it)."""
        with self._lock:
            first, self.refused = self.refused is None, self.refused or why
            return first

    def given_up(self) -> bool:
        """Failed more times in a row than a prompt may be retried (as dead as we are willing to
        wait for), or refused the key."""
        return self.refused is not None or self.failures > self.policy.retries
