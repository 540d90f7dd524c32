"""One request's exchange, whatever its API: the body read (413 past --max-body), decoded and checked
into a Job on a preparing thread, the Job run in the engine, and the answer written by the route's
writer, whole or streamed; one log line. The api/ modules map their requests onto this.

Streams are plain server-sent events (`data: {json}` lines and `data: [DONE]`), written here rather
than with sse-starlette, whose shutdown handling cancels streams mid-token: a stream here ends with
an error event and [DONE] when the server stops, and its request is cancelled in the engine when
the client leaves.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field, replace
from typing import AsyncIterator, Callable, TypeVar

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from specllama.decoding.constraint import Constraint, check_constraint
from specllama.decoding.engine import DoneEvent, TokenEvent
from specllama.decoding.engine import Request as EngineRequest
from specllama.decoding.grammar import GrammarFault
from specllama.errors import ContextOverflowError, SpecllamaError
from specllama.server.api_errors import APIError, invalid
from specllama.server.http_limits import EVENT_STREAM
from specllama.server.metrics import Metrics
from specllama.server.prepare import ClientGone, Preparer, disconnected
from specllama.server.request_body import body_json
from specllama.server.request_log import log_request
from specllama.server.schema import Job, ServedModel, context_message
from specllama.server.stopping import Stopping, unless_stopping
from specllama.server.worker import EngineWorker, QueueFull, Refused, ShuttingDown
from specllama.server.writer import Writer

T = TypeVar("T")
GAVE_UP = object()  # what _next_event returns once the stop's grace for the engine has passed
RETRY_AFTER_FULL = 1  # seconds a client waits after a 503 for a full queue
KEEP_ALIVE = 10.0  # serve's --keep-alive default
KEEP_ALIVE_COMMENT = ": keep-alive\n\n"  # an SSE comment: every client's parser skips it
QUIET = object()  # what _next_event returns when the stream's keep-alive interval passed with no event


@dataclass
class ServerState:
    runtime: object
    worker: EngineWorker
    served: ServedModel
    metrics: Metrics
    max_body: int
    draining: bool = False
    started: float = field(default_factory=time.time)
    preparer: Preparer = field(default_factory=Preparer)  # JSON and tokenizing, off the event loop
    stopping: Stopping = field(default_factory=Stopping)
    keep_alive: float = KEEP_ALIVE  # seconds of silence in a stream before a keep-alive is sent (0: never)


def refuse_if_draining(state: ServerState) -> None:
    if state.draining:
        raise APIError(503, "the server is shutting down", retry_after=RETRY_AFTER_FULL)


async def prepare_request(state: ServerState, request: Request, parse: Callable[[object, Callable[[], bool]], T]) -> T:
    """What every generating route does first: the body read (413 past --max-body), then decoded
    and turned into what the engine runs by parse(body, stop) on a preparing thread (prepare.py:
    bounded threads, dropped when the client leaves or the server stops; `stop()` says so)."""
    raw = await unless_stopping(state.stopping, read_body(request, state.max_body))
    return await state.preparer.run(lambda stop: parse(body_json(raw), stop), len(raw), request, state.stopping.begun)

def checked(state: ServerState, parse: Callable[[], Job], prompt_param: str) -> Job:
    """parse(), then the engine's own check; their SpecllamaErrors are the client's 400s. The job
    carries what the check prepared (its policy and grammar), which the engine thread admits as it is."""
    try:
        job = parse()
        prepared = state.runtime.check(EngineRequest(job.prompt, job.config))
    except ContextOverflowError as e:
        message = str(e) if e.prompt_tokens is None else context_message(e.prompt_tokens, e.n_ctx)
        raise invalid(message, prompt_param, code="context_length_exceeded") from None
    except GrammarFault as e:  # the request's grammar: its tools' or its response_format's
        if job.tools is not None and job.config.constraint and job.config.constraint.kind == "lark":
            raise _tool_fault(job, e) from None
        raise invalid(str(e), "response_format") from None
    except SpecllamaError as e:  # a chat template that fails to render, a drafter that needs a cost curve
        raise invalid(str(e)) from None
    return replace(job, prepared=prepared)

def _tool_fault(job: Job, error: GrammarFault) -> APIError:
    """A tools grammar that cannot be enforced, told as the tool whose schema is at fault (the
    grammar's own error points at a line of the Lark text this server wrote, issue 41)."""
    for i, tool in enumerate(job.tools.tools):
        function = tool["function"]
        schema = Constraint("json_schema", schema=function.get("parameters") or {"type": "object"},
                            strict=bool(function.get("strict")))
        try:
            check_constraint(schema)
        except SpecllamaError as e:
            return invalid(f"tools[{i}].function.parameters: {e}", f"tools[{i}].function.parameters")
    return invalid(str(error), "tools")

class SessionTemplate:
    """The Session's chat template as parse_chat asks for it (schema.ChatTemplate)."""

    def __init__(self, runtime, stop: Callable[[], bool], bounded: bool = True):
        self.runtime = runtime
        self.stop = stop
        self.bounded = bounded  # False: any length is tokenized (counting; the body's size is bounded)

    def tokens(self, messages: list[dict], tools: list[dict] | None, continue_last: bool,
               template_kwargs: dict | None = None) -> list[int]:
        if not self.bounded:
            return self.runtime.chat_tokens(messages, stop=self.stop, tools=tools, continue_last=continue_last,
                                            bounded=False, template_kwargs=template_kwargs)
        return self.runtime.chat_tokens(messages, stop=self.stop, tools=tools, continue_last=continue_last,
                                        template_kwargs=template_kwargs)

    def tool_call_format(self) -> str | None:
        return self.runtime.tool_call_format()

    def dialect(self):
        return self.runtime.chat_dialect()[0]

    def thinks(self) -> bool:
        return self.runtime.chat_dialect()[1]

    def opens_thinking(self, messages: list[dict], tools: list[dict] | None, template_kwargs: dict | None) -> bool:
        """Whether the generation prompt leaves the model inside its thinking (Qwen3-Thinking's
        `<think>\n`): the answer's first text is then thinking, with no opening marker of its own."""
        dialect = self.dialect()
        return dialect is not None and dialect.starts_thinking(
            self.runtime.render_chat(messages, tools=tools, template_kwargs=template_kwargs))

    def grammar_token(self, text: str) -> str:
        """`<[id]>` when `text` is one token of the vocabulary (a special token such as
        </tool_call>, which a grammar's plain string would not match), else a quoted string."""
        tokens = self.runtime.tokenize(text)
        if tokens and self.runtime.detokenize(tokens[-1:]) == text:
            return f"<[{tokens[-1]}]>"
        return json.dumps(text)

async def read_body(request: Request, limit: int) -> bytes:
    """The body's bytes, refused with 413 past `limit` bytes (by its Content-Length when it says,
    else as it arrives) before it is held in memory; ClientGone if the client leaves meanwhile."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise APIError(413, f"the request body is {int(length)} bytes; this server accepts at most {limit}")
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise APIError(413, f"the request body is over {limit} bytes, the most this server accepts")
            chunks.append(chunk)
    except ClientDisconnect:  # an upload cut short: nothing to answer, nothing to log
        raise ClientGone from None
    return b"".join(chunks)


async def answer(state: ServerState, request: Request, job: Job, writer: Writer) -> Response:
    """Run the job in the engine and answer with `writer`'s shapes, whole or streamed; one log line."""
    loop = asyncio.get_running_loop()
    events: asyncio.Queue = asyncio.Queue()
    wants_tokens = job.stream or job.top_logprobs is not None

    def sink(batch: list) -> None:  # called in the engine thread: a step's events, handed to the loop at once
        if not wants_tokens:
            batch = [event for event in batch if not isinstance(event, TokenEvent)]
        if batch:
            try:
                loop.call_soon_threadsafe(events.put_nowait, batch)
            except RuntimeError:  # the event loop has closed: the server is gone
                pass

    route = request.url.path
    try:
        tag = state.worker.submit(job.prepared, sink)
    except QueueFull:
        state.metrics.finished("refused")
        log_request(route, 503, None)
        raise APIError(503, "the server is busy: every slot is taken and the queue is full; try again shortly",
                       retry_after=RETRY_AFTER_FULL) from None
    except ShuttingDown:
        raise APIError(503, "the server is shutting down", retry_after=RETRY_AFTER_FULL) from None
    if job.stream:
        request.scope[EVENT_STREAM] = True  # a client that closes while the stream is silent is probed (http_limits.py)
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(_stream(state, request, tag, events, job, writer), media_type="text/event-stream",
                                 headers=headers)
    tokens: list[TokenEvent] = []
    while True:
        event = await _next_event(request, events, state.stopping.give_up)
        if not isinstance(event, list):
            break
        tokens += [e for e in event if isinstance(e, TokenEvent)]
        event = event[-1]  # a batch's last event: a token, or what ended the request
        if not isinstance(event, TokenEvent):
            break
    if event is None:  # the client left: its slot is freed, nobody reads an answer
        state.worker.cancel(tag)
        log_request(route, 499, None)
        return Response(status_code=499)
    if event is GAVE_UP:
        state.worker.cancel(tag)
    return _whole(state, event, writer, tokens, job, route)


def _whole(state: ServerState, event, writer: Writer, tokens: list[TokenEvent], job: Job, route: str) -> Response:
    if isinstance(event, DoneEvent):
        if event.summary.finish_reason == "cancelled":
            log_request(route, 503, event.summary)
            raise APIError(503, "the server is shutting down", retry_after=RETRY_AFTER_FULL)
        log_request(route, 200, event.summary, job.requested_max_tokens, job.config.max_tokens)
        return JSONResponse(writer.whole(event.summary, tokens))
    error = _failure(state, event)
    log_request(route, error.status, None)
    raise error


def _failure(state: ServerState, event) -> APIError:
    if isinstance(event, Refused):
        return APIError(event.status, event.message, retry_after=RETRY_AFTER_FULL if event.status == 503 else None)
    if event is GAVE_UP or state.draining:  # a prompt's prefill interrupted by the stop fails too
        return APIError(503, "the server is shutting down: the answer is incomplete", retry_after=RETRY_AFTER_FULL)
    return APIError(500, f"generation failed: {event.message}")


async def _stream(state: ServerState, request: Request, tag: int, events: asyncio.Queue, job: Job,
                  writer: Writer) -> AsyncIterator[str]:
    finished = logged = False
    route = request.url.path
    try:
        for line in writer.opening():
            yield line
        while True:
            event = await _next_event(request, events, state.stopping.give_up, state.keep_alive or None)
            if event is QUIET:  # a long prefill, or a wait for a slot: clients and proxies time out on silence
                for line in keep_alive(writer):
                    yield line
                continue
            if event is None:
                return  # the client left (finally cancels its request and logs the 499)
            if event is GAVE_UP:  # the engine did not end it in time: end the stream here
                for line in writer.failed(_failure(state, event)):
                    yield line
                logged = True
                log_request(route, 503, None)
                return
            # A step's tokens come together (EngineWorker._route): written as one chunk, one send, not one each.
            lines = [line for e in event if isinstance(e, TokenEvent) for line in writer.token(e)]
            if lines:
                yield "".join(lines)
            event = event[-1]  # a batch's last event: a token, or what ended the request
            if isinstance(event, TokenEvent):
                continue
            finished = True
            if isinstance(event, DoneEvent):
                for line in writer.done(event):
                    yield line
                logged = True
                log_request(route, 503 if event.summary.finish_reason == "cancelled" else 200, event.summary,
                            job.requested_max_tokens, job.config.max_tokens)
            else:
                error = _failure(state, event)
                for line in writer.failed(error):
                    yield line
                logged = True
                log_request(route, error.status, None)
            return
    finally:
        if not finished:
            state.worker.cancel(tag)
        # also when the server closed the stream on a gone client: the generator is then closed at a yield and the
        # `event is None` branch never runs; an agent's abandoned request (before its retry) stays in the log
        if not logged:
            log_request(route, 499, None)


def keep_alive(writer: Writer) -> list[str]:
    """The writer's own keep-alive (an event its clients skip: an empty chunk, Responses' in_progress, Anthropic's
    ping; clients that time out on silence count events, not comments), else an SSE comment."""
    own = getattr(writer, "keep_alive", None)
    return own() if own is not None else [KEEP_ALIVE_COMMENT]


async def _next_event(request: Request, events: asyncio.Queue, give_up: asyncio.Event, quiet: float | None = None):
    """The request's next events, as the engine thread handed them on (a list: one step's tokens, or what
    ended the request after any tokens not yet handed on); None when the client disconnects first, GAVE_UP
    when the server stopped long enough ago that it answers without waiting for the engine any more,
    QUIET when `quiet` seconds passed without any of those (a stream's keep-alive is due)."""
    if not events.empty():
        return events.get_nowait()
    get = asyncio.ensure_future(events.get())
    gone = asyncio.ensure_future(disconnected(request))
    stop = asyncio.ensure_future(give_up.wait())
    try:
        done, _ = await asyncio.wait({get, gone, stop}, timeout=quiet, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (get, gone, stop):
            task.cancel()
    if get.done() and not get.cancelled():  # it may have finished after wait() returned: its event is not lost
        return get.result()
    if not done:
        return QUIET
    return None if gone in done else GAVE_UP
