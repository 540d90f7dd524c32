"""Resumable batch generation on OpenAI-compatible servers: worker threads (a server's concurrency
each) take prompts from one shared queue and send them; the main thread alone writes the output.

Same guarantees as the local batch (batch/local.py): ids already in the output are skipped, each
finished prompt is one fsynced line (batch/output.py), a prompt that fails after its retries is
reported and not written (the next run tries it again), and Ctrl-C/SIGTERM returns with the file
valid. Only the main thread writes because OutputWriter is not thread-safe and because its
deferral of Ctrl-C during a write holds only in the thread that writes.
"""

from __future__ import annotations

import itertools
import queue
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from specllama.batch.output import OutputState, OutputWriter, open_output, signals_deferred
from specllama.batch.prompts_file import PromptItem, id_key
from specllama.batch.server_client import ServerClient, ServerError, chat_body, discover
from specllama.batch.server_pool import ServerHealth
from specllama.batch.server_reply import ServerReply
from specllama.decoding.request import GenerationConfig

DEFAULT_MODEL = "default"
# How long a batch that gives up on every server waits for workers to finish what they hold.
GIVE_UP_GRACE = 5.0  # sent when neither --model nor the server's /v1/models names one


@dataclass
class RemoteServer:
    url: str
    concurrency: int
    health: ServerHealth
    model: str | None = None  # None: ask the server (/v1/models) before its first prompt
    api_key: str | None = None
    timeout: float = 600.0

    def client(self) -> ServerClient:
        return ServerClient(self.url, api_key=self.api_key, timeout=self.timeout)


@dataclass
class ServerStats:
    completed: int = 0
    tokens: int = 0
    errors: int = 0  # failed attempts, retried or not
    in_rotation: bool = True


@dataclass
class RemoteReport:
    written: int = 0
    skipped: int = 0  # already in the output from an earlier run
    failed: list[tuple[PromptItem, str]] = field(default_factory=list)
    not_attempted: int = 0  # left when every server stayed down through a full retry schedule
    interrupted: bool = False
    repaired: str | None = None
    drafted: int = 0
    accepted: int = 0
    servers: dict[str, ServerStats] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    refused: dict[str, str] = field(default_factory=dict)  # server url -> its answer to our API key

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None


def make_remote_record(item: PromptItem, reply: ServerReply, server: str) -> dict:
    """The local record's fields (batch/local.make_record) plus the server and its draft counts.
    mean_accepted needs the number of target decodes, which only specllama serve reports (null from
    other servers); drafted_by / accepted_by, per drafter, likewise appear only from it."""
    acceptance = reply.accepted / reply.drafted if reply.drafted and reply.accepted is not None else None
    mean_accepted = (round((reply.accepted + reply.steps) / reply.steps, 3)
                     if reply.steps and reply.accepted is not None else None)
    per_source = ({"drafted_by": reply.drafted_by, "accepted_by": reply.accepted_by or {}}
                  if reply.drafted_by is not None else {})
    return {
        "id": item.id,
        "prompt": item.prompt,
        "text": reply.text,
        "tokens": reply.tokens,
        "tokens_per_s": round(reply.tokens_per_s, 3),
        "acceptance": acceptance,
        "mean_accepted": mean_accepted,
        "finish_reason": reply.finish_reason,
        "prompt_tokens": reply.prompt_tokens,
        "seconds": round(reply.seconds, 3),
        "server": server,
        "drafted": reply.drafted,
        "accepted": reply.accepted,
        **per_source,
    }


# Called on the main thread: (event, report). Events: ("done"|"failed", item, server url),
# ("down", server url, message, cool-down seconds), ("up", server url), ("retry", server url, message),
# ("refused", server url, message): the server refused the API key and takes no more prompts.
RemoteProgress = Callable[[tuple, RemoteReport], None]


@dataclass(order=True)
class _Task:
    priority: int  # 0: a retry, taken before new prompts so a failing prompt finishes its schedule
    seq: int
    item: PromptItem = field(compare=False)
    attempts: int = field(default=0, compare=False)


def run_remote_batch(servers: Sequence[RemoteServer], items: Sequence[PromptItem], config: GenerationConfig,
                     out_path: str | Path, *, system: str | None = None, state: OutputState | None = None,
                     progress: RemoteProgress | None = None) -> RemoteReport:
    progress = progress or (lambda event, report: None)
    state = state or open_output(out_path)
    report = RemoteReport(repaired=state.repaired, servers={s.url: ServerStats() for s in servers})
    todo = [item for item in items if id_key(item.id) not in state.done]
    report.skipped = len(items) - len(todo)
    seq = itertools.count()
    work: queue.PriorityQueue[_Task] = queue.PriorityQueue()
    for item in todo:
        work.put(_Task(1, next(seq), item))
    results: queue.Queue[tuple] = queue.Queue()
    stop = threading.Event()
    retries = servers[0].health.policy.retries if servers else 0
    threads = [threading.Thread(target=_worker, args=(server, work, results, stop, seq, system, config, retries),
                                name=f"specllama-{server.url}-{n}", daemon=True)
               for server in servers for n in range(server.concurrency)]
    writer = OutputWriter(out_path)
    remaining = len(todo)
    try:
        progress(("start", len(todo)), report)
        for t in threads:
            t.start()
        while remaining:
            if not any(t.is_alive() for t in threads):  # cannot happen (workers catch everything): never hang
                remaining -= _drain(results, writer, report, progress)
                report.not_attempted = remaining
                break
            if all(s.health.given_up() for s in servers):
                # Every server dead for a whole retry schedule: let the workers report what they
                # still hold (a failure that gave a server up is reported after it counted), stop.
                stop.set()
                deadline = time.monotonic() + GIVE_UP_GRACE
                for t in threads:
                    t.join(timeout=max(0.01, deadline - time.monotonic()))
                remaining -= _drain(results, writer, report, progress)
                report.not_attempted = remaining
                break
            try:
                event = results.get(timeout=0.25)
            except queue.Empty:
                continue
            remaining -= _handle(event, writer, report)
            progress(event, report)
    except KeyboardInterrupt:
        report.interrupted = True
        stop.set()
        _drain(results, writer, report, progress, only_done=True)  # answers already here are kept
    finally:
        stop.set()
        writer.close()
    return report


def _handle(event: tuple, writer: OutputWriter, report: RemoteReport) -> int:
    """Apply one worker event; the number of prompts it finishes (0 or 1)."""
    kind = event[0]
    if kind == "done":
        _, item, url, reply = event
        with signals_deferred():  # the line and its count together
            writer.write(make_remote_record(item, reply, url))
            stats = report.servers[url]
            stats.completed += 1
            stats.tokens += reply.tokens
            report.written += 1
            if reply.drafted and reply.accepted is not None:
                report.drafted += reply.drafted
                report.accepted += reply.accepted
        return 1
    if kind == "failed":
        _, item, url, reason = event
        report.servers[url].errors += 1
        report.failed.append((item, f"{reason} (last tried on {url})"))
        return 1
    if kind == "retry":
        report.servers[event[1]].errors += 1
    elif kind == "down":
        report.servers[event[1]].in_rotation = False
    elif kind == "refused":
        report.servers[event[1]].in_rotation = False
        report.refused[event[1]] = event[2]
    elif kind == "up":
        report.servers[event[1]].in_rotation = True
    return 0


def _drain(results: queue.Queue, writer: OutputWriter, report: RemoteReport, progress: RemoteProgress,
           only_done: bool = False) -> int:
    finished = 0
    try:
        while True:
            event = results.get_nowait()
            if not only_done or event[0] == "done":
                finished += _handle(event, writer, report)
                progress(event, report)
    except (queue.Empty, KeyboardInterrupt):
        pass
    return finished


def _worker(server: RemoteServer, work: queue.PriorityQueue, results: queue.Queue, stop: threading.Event,
            seq: itertools.count, system: str | None, config: GenerationConfig, retries: int) -> None:
    if hasattr(signal, "pthread_sigmask"):
        # Ctrl-C and SIGTERM go to the main thread only, where the writer can hold them off mid-line.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    client = server.client()
    health = server.health
    try:
        while not stop.is_set() and health.refused is None:
            wait, probe = health.acquire(time.monotonic())
            if wait > 0:
                stop.wait(min(wait, 0.25))
                continue
            started = time.monotonic()
            try:
                if server.model is None:
                    server.model = discover(client)[0] or DEFAULT_MODEL
                task = work.get(timeout=0.1)
            except queue.Empty:
                health.abandon(probe)
                continue
            except Exception as e:
                e = _as_server_error(e, client)
                if e.refused_key:
                    _refused(server, e, results)
                    return
                _server_failed(server, started, e, results)
                continue
            item = task.item
            try:
                reply = client.chat(chat_body(item.prompt, item.system or system, server.model, config))
            except Exception as e:  # one odd reply fails its prompt; the worker goes on (else the batch waits forever)
                e = _as_server_error(e, client)
                if e.refused_key:  # the prompt goes to another server, if one takes our key
                    work.put(_Task(0, next(seq), item, task.attempts))
                    _refused(server, e, results)
                    return
                if e.server_fault:
                    _server_failed(server, started, e, results)
                elif health.succeeded(started):  # it answered, only this prompt is refused
                    results.put(("up", server.url))
                task.attempts += 1
                if not e.retryable or task.attempts > retries:
                    results.put(("failed", item, server.url, str(e)))
                else:
                    results.put(("retry", server.url, f"prompt {item.id!r}: {e}"))
                    work.put(_Task(0, next(seq), item, task.attempts))
                continue
            if health.succeeded(started):
                results.put(("up", server.url))
            results.put(("done", item, server.url, reply))
    finally:
        client.close()


def _as_server_error(e: Exception, client: ServerClient) -> ServerError:
    """A ServerError as it is; anything else (a bug, a reply nobody foresaw) fails the prompt
    without retrying it, and the connection, in an unknown state, is dropped."""
    if isinstance(e, ServerError):
        return e
    client.close()
    return ServerError(f"unexpected error: {type(e).__name__}: {e}", retryable=False, server_fault=False)


def _refused(server: RemoteServer, error: ServerError, results: queue.Queue) -> None:
    if server.health.refuse(str(error)):
        results.put(("refused", server.url, str(error)))


def _server_failed(server: RemoteServer, started: float, error: ServerError, results: queue.Queue) -> None:
    delay = server.health.failed(started, time.monotonic(), error.retry_after)
    if delay is not None:
        results.put(("down", server.url, str(error), delay))
