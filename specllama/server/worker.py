"""The one engine thread behind every HTTP request.

A single thread iterates `Runtime.run_many` over a live RequestQueue: requests that arrive while it
decodes join between steps (continuous batching), a new request gets the free slot whose cache
shares the longest prefix with it (the engine's _admit), and every finished text joins the suffix
drafter's shared history, so an agent's re-sent context is drafted from. Each request's events go
to its own sink (the handler's asyncio queue, fed through loop.call_soon_threadsafe), a step's tokens
together: see _route.

Cancelling: a request still waiting is taken out of the queue; one being generated is stopped by the
engine after its current step, which frees its slot. Either way the sink is dropped at once: the
client is gone and nothing more is sent to it.
"""

from __future__ import annotations

import itertools
import sys
import threading
import traceback
from dataclasses import dataclass
from typing import Callable

from specllama.decoding.cancel import CancelHandle
from specllama.decoding.engine import DoneEvent, FailedEvent, StepEvent, TokenEvent
from specllama.decoding.prepared import Prepared
from specllama.decoding.request_queue import CLOSED, RequestQueue
from specllama.server.metrics import Metrics


@dataclass(frozen=True)
class Refused:
    """What a sink gets instead of a result when the server refuses or abandons its request."""

    status: int
    message: str


FAILURE_LOG_CHARS = 500  # the dead engine's error in the server's log: its reason, not a grammar's dump
# Called from the engine thread with the request's next events: one step's TokenEvents, or one DoneEvent,
# FailedEvent or Refused (after any tokens not yet handed on).
Sink = Callable[[list], None]


class QueueFull(Exception):
    pass


class ShuttingDown(Exception):
    pass


class EngineWorker:
    def __init__(self, runtime, max_queue: int, metrics: Metrics):
        self.runtime = runtime
        self.max_queue = max_queue
        self.metrics = metrics
        self.queue = RequestQueue()
        self._sinks: dict[int, Sink] = {}
        self._tokens: dict[int, list[TokenEvent]] = {}  # each request's tokens of the step under way (engine thread)
        self._handles: dict[int, CancelHandle] = {}  # each unfinished request's cancel handle
        self._unfinished: set[int] = set()  # submitted, no DoneEvent yet (waiting or holding a slot)
        self._lock = threading.Lock()
        self._tags = itertools.count()  # tags are never reused: the engine remembers cancelled ones
        self._closed = False
        self.failure: str | None = None  # set when the engine thread died (a bug): for the server's log only
        # Called (from the engine thread) once it has died: the server then exits non-zero so that a
        # supervisor restarts it, rather than answering 503 for ever with the process up (issue 41).
        self.on_death: Callable[[], None] | None = None
        self._thread = threading.Thread(target=self._run, name="specllama-engine", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and self.failure is None

    def submit(self, prepared: Prepared, sink: Sink) -> int:
        """Queue a request the engine has checked (Runtime.check, on a preparing thread): the engine
        admits it as it is. Its events go to `sink`. Raises QueueFull or ShuttingDown."""
        with self._lock:
            if self._closed or self.failure is not None:
                raise ShuttingDown
            # Every request the engine holds or will hold counts against the slots first, the queue
            # only beyond them: the engine takes waiting requests between steps, so counting the
            # RequestQueue alone refused requests while slots were free (issue 33: 10 at once on
            # 2 slots and a queue of 2 got 3 through, not 4).
            if len(self._unfinished) >= self.runtime.parallelism + self.max_queue:
                raise QueueFull
            tag = next(self._tags)
            self._sinks[tag] = sink
            self._unfinished.add(tag)
            request = prepared.tagged(tag)
            self._handles[tag] = request.cancel
            self.queue.put(request)
        return tag

    def cancel(self, tag: int) -> None:
        """The client went away: forget its sink, and stop its request (freeing its slot)."""
        with self._lock:
            self._sinks.pop(tag, None)
            if tag not in self._unfinished:
                return
            if self.queue.discard(tag):
                self._unfinished.discard(tag)
                self._handles.pop(tag, None)
                self.metrics.finished("cancelled")
                return
            handle = self._handles.get(tag)
        if handle is not None:
            handle.cancel()  # it holds a slot: stopped after the current step

    def counts(self) -> tuple[int, int]:
        """(requests generating, requests waiting for a slot)."""
        with self._lock:
            waiting = len(self.queue)
            return len(self._unfinished) - waiting, waiting

    def drain(self) -> None:
        """Shutting down: refuse new requests, refuse the waiting ones, stop the running ones after
        their current step (their handlers then end their streams cleanly)."""
        with self._lock:
            self._closed = True
            waiting = []
            while (request := self.queue.poll(block=False)) not in (None, CLOSED):
                waiting.append(request.tag)
            self.queue.close()
            running = [tag for tag in self._unfinished if tag not in waiting]
            for tag in waiting:
                self._unfinished.discard(tag)
                self._handles.pop(tag, None)
                sink = self._sinks.pop(tag, None)
                if sink:
                    sink([Refused(503, "the server is shutting down")])
                self.metrics.finished("refused")
            handles = [self._handles[tag] for tag in running if tag in self._handles]
        for handle in handles:
            handle.cancel()

    def join(self, timeout: float) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        try:
            for tag, event in self.runtime.run_many(self.queue):
                self._route(tag, event)
        except BaseException as e:  # a bug in the engine loop itself (one request's failure never gets here)
            self.failure = f"{type(e).__name__}: {str(e)[:FAILURE_LOG_CHARS]}"
            print(f"specllama serve: the engine stopped: {self.failure}; exiting so that a supervisor restarts the "
                  "server", file=sys.stderr, flush=True)
            traceback.print_exception(e, file=sys.stderr)
            with self._lock:
                self._closed = True
                sinks = list(self._sinks.values())
                self._sinks.clear()
                self._unfinished.clear()
                self._handles.clear()
            for sink in sinks:  # the reason is the server's (its log has it), never another request's text
                sink([Refused(500, "the engine stopped; the server is exiting")])
            if self.on_death is not None:
                self.on_death()

    def _route(self, tag: int, event) -> None:
        """One event of the engine's. A step's tokens for a request are held until its StepEvent, which
        follows them at once, and handed on together. Why: each hand-off wakes the event loop, whose thread,
        on a machine whose cores all decode, runs in a decoding thread's place (a streamed answer's plain
        steps spent 0.5-1.1 ms more outside llama_decode than a whole one's: bench/measured/
        xeon-20261127-serve-step-split), and a step that accepted a 30-token copy handed on 30 times while
        the next decode ran. One hand-off a step cut the event loop's CPU for a streamed 240-token agent
        edit from 40-53 ms to 30-37 ms (2-vCPU Xeon, scratch measurement, issue 42's closing note)."""
        if isinstance(event, TokenEvent):
            self.metrics.token()
            self._tokens.setdefault(tag, []).append(event)
            return
        events = self._tokens.pop(tag, [])
        if isinstance(event, StepEvent):
            self.metrics.step(event)
        else:
            events.append(event)
        if not events:
            return
        final = isinstance(event, (DoneEvent, FailedEvent))
        with self._lock:
            sink = self._sinks.pop(tag, None) if final else self._sinks.get(tag)
            if final:
                self._unfinished.discard(tag)
                self._handles.pop(tag, None)
        if final:
            self.metrics.done(event)
        if sink is not None:
            sink(events)
