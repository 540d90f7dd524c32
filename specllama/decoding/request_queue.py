"""Requests that arrive while the engine runs (a server's clients), for `Engine.run_many`.

`run_many` pulls requests between steps whenever a slot is free. A plain iterator suits a batch
file (its end is the end of the job); a server needs a source that can say "nothing waiting right
now" without ending the job, and that blocks only while the engine has nothing else to do:
`poll(block)` is that. `put` and `close` are called from other threads (the server's handlers).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Hashable


class Closed:
    """What poll returns once the queue is closed and empty: the engine's job ends."""


CLOSED = Closed()


class RequestQueue:
    def __init__(self) -> None:
        self._items: deque = deque()
        self._ready = threading.Condition()
        self._closed = False

    def put(self, request) -> None:
        with self._ready:
            if self._closed:
                raise RuntimeError("the request queue is closed")
            self._items.append(request)
            self._ready.notify()

    def discard(self, tag: Hashable) -> bool:
        """Drop a request that has not been admitted yet (its client went away); True if it was waiting."""
        with self._ready:
            for item in self._items:
                if item.tag == tag:
                    self._items.remove(item)
                    return True
        return False

    def close(self) -> None:
        """No more requests: the engine finishes what it holds, then run_many ends."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()

    def __len__(self) -> int:
        with self._ready:
            return len(self._items)

    def poll(self, block: bool):
        """The next request; None when none is waiting (and block is False); CLOSED at the end.
        With block=True (the engine is idle) it waits for a request or for close()."""
        with self._ready:
            while block and not self._items and not self._closed:
                self._ready.wait()
            if self._items:
                return self._items.popleft()
            return CLOSED if self._closed else None
