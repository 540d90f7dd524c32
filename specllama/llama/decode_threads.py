"""Which threads run llama.cpp's decodes: one long-lived thread a process, because of how OpenMP waits.

Every OS thread that starts a decode gets an OpenMP team of its own (libgomp keeps a pool of worker
threads per thread that opens a parallel region), and those workers stay until that thread exits.
libgomp counts the workers of all pools, and once they outnumber the cores every barrier spins its
"throttled" count (100 PAUSEs unless OMP_WAIT_POLICY=ACTIVE, whatever GOMP_SPINCOUNT says) before it
sleeps in a futex: the sleeping wait thread_wait.py exists to avoid, without anyone asking for it.

Measured on the 2-core Xeon (1.5B target, one-token decodes at a fill of 400, 40 a phase, 3 rounds;
scripts/measure/decode_threads.py, bench/measured/xeon-20261127-decode-threads): from one thread
78-88 ms a token, 2.00 cores busy, 0-1 voluntary context switches a phase; the same decodes after
another thread (still alive) ran one decode 90-110 ms, 1.85 cores, ~24,000 switches. `serve` did just
that from f2e95c2 on (its warm-up on the main thread, its requests on the engine thread): plain
serving fell to 0.90-0.96x of llama-server while `run --no-draft` stayed level, its two decoding
threads at 0.94 + 0.88 cores and 143,620 voluntary switches an answer where llama-server's are at
0.99 + 0.98 and 1,144 (bench/measured/xeon-20261127-serve-thread-cores; after: 0.98 + 0.98 and 493).

So: a process decodes on one thread that lives as long as it does (run's main thread, serve's
engine thread, the chat's `on_decode_thread`); a one-off decode elsewhere (a server's warm-up before
its engine starts) runs on a thread of its own that exits before decoding goes on
(`on_passing_thread`), which hands its workers back. The chat needs the former because Textual runs
its thread workers on asyncio's default executor, whose threads live on: an answer started while
the last one's worker thread had not yet gone idle (Esc, then a new message) got a second executor
thread, and every later answer decoded with sleeping barriers (~60,000 voluntary switches an answer
against ~500, bench/measured/xeon-20261127-chat-decode-thread). `noted` keeps the count per thread
that tests check.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import Callable, TypeVar

T = TypeVar("T")

_decodes: dict[threading.Thread, int] = {}  # decodes each thread ran (a finished one's dropped)
_last: threading.Thread | None = None
_work: queue.SimpleQueue | None = None  # the decoding thread's, once started
_start = threading.Lock()


def noted() -> None:
    """Called before every decode: a count, and a look for finished threads when a new one decodes."""
    global _last
    thread = threading.current_thread()
    if thread is not _last:
        _last = thread
        if thread not in _decodes:
            for gone in [t for t in list(_decodes) if not t.is_alive()]:  # a warm-up's passing thread, say
                del _decodes[gone]
            _decodes[thread] = 0
    _decodes[thread] += 1


def decodes_by_thread() -> dict[threading.Thread, int]:
    """The threads that decoded and are still alive, with how many decodes each ran."""
    return {t: n for t, n in list(_decodes.items()) if t.is_alive()}


def on_passing_thread(work: Callable[[], T], name: str = "specllama-passing") -> T:
    """Run `work` on a thread of its own and wait for it: its decodes leave no OpenMP pool behind
    once it exits. Its exception, if any, is raised here."""
    done: Future = Future()
    thread = threading.Thread(target=_settle, args=(work, done), name=name, daemon=True)
    thread.start()
    thread.join()
    return done.result()


def on_decode_thread(work: Callable[[], T]) -> T:
    """Run `work` on this process's one decoding thread (started on first use, a daemon that lives as
    long as the process) and wait for it; its exception, if any, is raised here. Calls from several
    threads run one after the other, in the order they came."""
    global _work
    with _start:
        if _work is None:
            _work = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(_work,), name="specllama-decode", daemon=True).start()
    done: Future = Future()
    _work.put((work, done))
    return done.result()


def _serve(work_queue: queue.SimpleQueue) -> None:
    while True:
        _settle(*work_queue.get())


def _settle(work: Callable, done: Future) -> None:
    """`work`'s result or exception into `done`, for the thread that waits on it."""
    try:
        done.set_result(work())
    except BaseException as e:  # noqa: BLE001 - handed to the caller, whatever it is
        done.set_exception(e)
