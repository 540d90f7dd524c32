"""The server's stop as the request handlers see it (SIGTERM or Ctrl-C; see run.py).

`begun`: nothing new starts; a body still uploading or being prepared is answered 503 at once.
`give_up`: a few seconds later, a handler still waiting for the engine's last word (the engine
ends running requests after its current step, or a long prompt's current chunk) answers 503 or
ends its stream itself. So every client gets OpenAI's error JSON, or an error event and [DONE],
well before uvicorn's own grace period runs out: past it uvicorn cancels handlers and writes a
plain-text "Internal Server Error".
"""

from __future__ import annotations

import asyncio
import time
from typing import Awaitable, TypeVar

from specllama.server.prepare import ServerStopping

T = TypeVar("T")


class Stopping:
    def __init__(self) -> None:
        self.begun = asyncio.Event()
        self.give_up = asyncio.Event()
        self.since: float | None = None  # time.monotonic() when the stop began

    def begin(self, answer_within: float) -> None:
        """Called on the event loop when the server starts to stop."""
        if self.since is not None:
            return
        self.since = time.monotonic()
        self.begun.set()
        asyncio.get_running_loop().call_later(answer_within, self.give_up.set)


async def unless_stopping(stopping: Stopping, work: Awaitable[T]) -> T:
    """`work`'s result, or ServerStopping if the stop begins first (the work is cancelled)."""
    task = asyncio.ensure_future(work)
    stop = asyncio.ensure_future(stopping.begun.wait())
    try:
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        if not task.done():
            task.cancel()
    if task.done() and not task.cancelled():
        return task.result()
    raise ServerStopping
