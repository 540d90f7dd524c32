"""The loading worker's side: build the runtime in a thread, report progress and the outcome.

Download progress arrives many times a second (one call per chunk); at most ~10 messages a second
reach the UI. A SpecllamaError (missing file, bad pair, no network) is the user's to fix and is
reported as such; anything else is a bug, reported with its traceback kept for later.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

from textual.message import Message

from specllama.errors import SpecllamaError

Progress = Callable[[int, int | None, str], None]  # (done_bytes, total_bytes | None, what)
Status = Callable[[str], None]  # a phase without a byte count ("auto drafter: not loading the draft model ...")
RuntimeFactory = Callable[[Progress, Status], Any]  # -> a loaded Runtime, or anything shaped like one


@dataclass
class LoadProgress(Message):
    done: int
    total: int | None
    what: str


@dataclass
class LoadStatus(Message):
    text: str


@dataclass
class RuntimeReady(Message):
    runtime: Any


@dataclass
class RuntimeFailed(Message):
    reason: str
    trace: str | None = None  # set when the failure is a bug rather than a user-fixable problem


@dataclass(frozen=True)
class Messages:
    """The messages one kind of load posts: the first load and a model switch are told apart."""

    progress: type = LoadProgress
    status: type = LoadStatus
    ready: type = RuntimeReady
    failed: type = RuntimeFailed


def load_runtime(factory: RuntimeFactory, post: Callable[[Message], bool], interval: float = 0.1,
                 messages: Messages = Messages()) -> None:
    m = messages
    last = 0.0

    def progress(done: int, total: int | None, what: str) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= interval or (total and done >= total):
            last = now
            post(m.progress(done, total, what))

    try:
        runtime = factory(progress, lambda text: post(m.status(text)))
    except SpecllamaError as e:
        post(m.failed(str(e)))
        return
    except Exception as e:
        post(m.failed(f"unexpected {type(e).__name__}: {e}", traceback.format_exc()))
        return
    if not post(m.ready(runtime)):
        runtime.close()  # the app quit while the models were loading: nobody else will free them
