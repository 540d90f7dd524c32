"""Request bodies turned into jobs (JSON, chat template, tokenizing) on a few threads of their own.

This is the CPU work a client controls before the engine sees its request: up to --max-body bytes
of JSON and text. Running it in Starlette's shared thread pool (40 threads) let 42 hostile bodies
take every core for minutes, and nothing stopped a parse whose client had gone or that the server
was stopping for (issue 33). Here:

- a few threads do it (`workers`), smallest body first, and the last thread takes only small
  bodies, so an ordinary request never waits behind a megabyte of someone else's text;
- a job whose client leaves, or that the server stops for, is dropped before it starts, and one
  already tokenizing stops at its next piece (its `stop()` says so; see GGUFModel.tokenize);
- `close()` then `join()` let the server wait until no thread is inside llama.cpp before the
  models are freed (a tokenize call running after llama_model_free was the SIGSEGV on SIGTERM).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
import time
from typing import Callable

from starlette.requests import Request

from specllama.errors import Stopped

SMALL_BODY = 64 * 1024  # bytes: what the last thread still takes (any chat an editor sends)
DEFAULT_WORKERS = 2


class ClientGone(Exception):
    """The client disconnected while its request was being prepared."""


class ServerStopping(Exception):
    """The server began to stop while the request was being prepared."""


class _Job:
    def __init__(self, fn: Callable[[Callable[[], bool]], object], size: int, loop: asyncio.AbstractEventLoop):
        self.fn = fn
        self.size = size
        self.loop = loop
        self.result: asyncio.Future = loop.create_future()
        self.abandoned = threading.Event()

    def deliver(self, ok: bool, value) -> None:
        def settle() -> None:
            if not self.result.done():
                (self.result.set_result if ok else self.result.set_exception)(value)

        try:
            self.loop.call_soon_threadsafe(settle)
        except RuntimeError:  # the event loop has closed: nobody waits for it any more
            pass


class Preparer:
    def __init__(self, workers: int = DEFAULT_WORKERS):
        self._waiting: list[tuple[int, int, _Job]] = []  # a heap: smallest body first, then oldest
        self._order = itertools.count()
        self._ready = threading.Condition()
        self._closed = False
        self._busy = 0
        self.abandoned = 0  # jobs dropped before they started, or stopped part way (their client left)
        small_only = [False] * max(1, workers - 1) + ([True] if workers > 1 else [])
        self._threads = [threading.Thread(target=self._work, args=(only,), name=f"specllama-prepare-{i}", daemon=True)
                         for i, only in enumerate(small_only)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def counts(self) -> tuple[int, int]:
        """(bodies being prepared now, bodies waiting for a thread)."""
        with self._ready:
            return self._busy, sum(1 for _, _, job in self._waiting if not job.abandoned.is_set())

    async def run(self, fn: Callable[[Callable[[], bool]], object], size: int, request: Request,
                  stopping: asyncio.Event):
        """fn(stop) on a preparing thread, for a body of `size` bytes; its result, or its exception.
        Raises ClientGone when the client leaves first, ServerStopping when the server stops first
        (the thread, if it started, stops at its next chance and its result is dropped)."""
        job = _Job(fn, size, asyncio.get_running_loop())
        with self._ready:
            if self._closed:
                raise ServerStopping
            heapq.heappush(self._waiting, (size, next(self._order), job))
            self._ready.notify_all()
        gone = asyncio.ensure_future(disconnected(request))
        stop = asyncio.ensure_future(stopping.wait())
        try:
            await asyncio.wait({job.result, gone, stop}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # the handler itself was cancelled: nobody will read the result
            job.abandoned.set()
            raise
        finally:
            for task in (gone, stop):
                task.cancel()
        if job.result.done():
            return job.result.result()
        job.abandoned.set()
        job.result.cancel()
        raise ServerStopping if stop.done() and not stop.cancelled() else ClientGone

    def close(self) -> None:
        """The server is stopping: nothing new starts; what runs stops at its next piece."""
        with self._ready:
            self._closed = True
            for _, _, job in self._waiting:
                job.abandoned.set()
            self.abandoned += len(self._waiting)
            self._waiting.clear()
            self._ready.notify_all()

    def join(self, deadline: float) -> bool:
        """Wait (until time.monotonic() reaches `deadline`) for every thread to end; True if they did."""
        for thread in self._threads:
            if thread.is_alive():
                thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self._threads)

    def _take(self, small_only: bool) -> _Job | None:
        with self._ready:
            while True:
                if self._closed:
                    return None
                if self._waiting and (not small_only or self._waiting[0][0] <= SMALL_BODY):
                    job = heapq.heappop(self._waiting)[2]
                    if job.abandoned.is_set():
                        self.abandoned += 1
                        continue
                    self._busy += 1
                    return job
                self._ready.wait()

    def _work(self, small_only: bool) -> None:
        while (job := self._take(small_only)) is not None:
            try:
                job.deliver(True, job.fn(job.abandoned.is_set))
            except Stopped:
                with self._ready:
                    self.abandoned += 1
            except BaseException as e:  # the handler raises it (a 400, or a bug's 500)
                job.deliver(False, e)
            finally:
                with self._ready:
                    self._busy -= 1


async def disconnected(request: Request) -> None:
    """Returns when the client has gone (what request.receive() says once the body is read)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
