"""The HTTP side: Starlette routes over the engine worker.

Why Starlette and not FastAPI: the API is six routes, and OpenAI's clients expect OpenAI's error
JSON for every malformed body, which is what schema.py writes by hand; FastAPI's model validation
would answer 422 in its own shape and need overriding field by field. Streams are plain server-sent
events (`data: {json}` lines and `data: [DONE]`), written here rather than with sse-starlette,
whose shutdown handling cancels streams mid-token: a stream here ends with an error event and
[DONE] when the server stops, and its request is cancelled in the engine when the client leaves.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import AsyncIterator, Callable, TypeVar

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from specllama.decoding.constraint import Constraint, check_constraint
from specllama.decoding.engine import DoneEvent, TokenEvent
from specllama.decoding.engine import Request as EngineRequest
from specllama.decoding.grammar import GrammarFault
from specllama.errors import ContextOverflowError, SpecllamaError
from specllama.server.api import anthropic, openai_responses
from specllama.server.api.anthropic import AnthropicWriter
from specllama.server.api.openai_chat import Answer
from specllama.server.api.openai_responses import ResponsesWriter
from specllama.server.api_errors import APIError, invalid
from specllama.server.browser_guard import BrowserGuard, allowed_hosts
from specllama.server.metrics import Metrics
from specllama.server.prepare import ClientGone, Preparer, ServerStopping, disconnected
from specllama.server.request_body import body_json
from specllama.server.request_log import log_request
from specllama.server.schema import Job, ServedModel, chat_prompt_tokens, parse_chat, parse_completion
from specllama.server.stopping import Stopping, unless_stopping
from specllama.server.worker import EngineWorker, QueueFull, Refused, ShuttingDown
from specllama.server.writer import OpenAIWriter, Writer

T = TypeVar("T")
GAVE_UP = object()  # what _next_event returns once the stop's grace for the engine has passed
OPEN_PATHS = ("/health", "/v1/health")  # answered without the API key (load balancers probe them)
RETRY_AFTER_FULL = 1  # seconds a client waits after a 503 for a full queue
LOCAL_ORIGINS = r"https?://(localhost|127\.0\.0\.1|\[::1\])(:\d+)?"  # CORS: pages served from this machine


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


def create_app(state: ServerState, api_key: str | None = None, cors: tuple[str, ...] = (),
               hosts: frozenset[str] | None = allowed_hosts("127.0.0.1")) -> Starlette:
    """The routes; the key check (when a key is set) inside CORS, so a browser's preflight, which
    carries no key, is answered; outside both, the Origin and Host checks (browser_guard.py;
    `hosts`: the Host names answered, None for any)."""
    routes = [
        Route("/v1/chat/completions", _handler(state, chat=True), methods=["POST"]),
        Route("/v1/completions", _handler(state, chat=False), methods=["POST"]),
        Route("/v1/messages", _messages_handler(state), methods=["POST"]),
        Route("/v1/messages/count_tokens", _count_tokens_handler(state), methods=["POST"]),
        Route("/v1/responses", _responses_handler(state), methods=["POST"]),
        Route("/v1/models", lambda request: JSONResponse(_models(state)), methods=["GET"]),
        Route("/v1/models/{model_id:path}", lambda request: _model(state, request.path_params["model_id"]),
              methods=["GET"]),
        Route("/health", lambda request: _health(state), methods=["GET"]),
        Route("/v1/health", lambda request: _health(state), methods=["GET"]),
        Route("/props", lambda request: JSONResponse(_props(state)), methods=["GET"]),
        Route("/metrics", lambda request: _metrics(state), methods=["GET"]),
    ]
    handlers = {APIError: lambda request, e: e.response(), HTTPException: _http_error, Exception: _internal_error,
                ClientGone: lambda request, e: Response(status_code=499),  # nobody reads it
                ServerStopping: lambda request, e: APIError(503, "the server is shutting down",
                                                            retry_after=RETRY_AFTER_FULL).response()}
    app = Starlette(routes=routes, exception_handlers=handlers)
    if api_key:
        app.add_middleware(APIKeyCheck, key=api_key)
    # A browser UI on this machine (any port) may call the API; --cors names more origins ("*": any).
    app.add_middleware(CORSMiddleware, allow_origins=list(cors), allow_origin_regex=LOCAL_ORIGINS, allow_methods=["*"],
                       allow_headers=["*"], expose_headers=["Retry-After"], max_age=600)
    app.add_middleware(BrowserGuard, hosts=hosts, origins=tuple(cors), local_origins=LOCAL_ORIGINS)
    return app


class APIKeyCheck:
    """The key on every route but the health check, as `Authorization: Bearer KEY` (the scheme in
    any case, as HTTP says) or `x-api-key: KEY` (Anthropic's clients), compared in constant time
    (hmac.compare_digest) so response timing says nothing about how much of a guess was right."""

    def __init__(self, app, key: str):
        self.app = app
        self.expected = key.encode("utf-8")

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            headers = dict(scope["headers"])
            scheme, _, given = headers.get(b"authorization", b"").partition(b" ")
            if scheme.lower() != b"bearer":
                given = headers.get(b"x-api-key", b"")
            if not hmac.compare_digest(given.strip(), self.expected):
                error = APIError(401, "invalid or missing API key: send 'Authorization: Bearer KEY' or 'x-api-key: KEY'",
                                 code="invalid_api_key")
                await error.response()(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _handler(state: ServerState, chat: bool):
    async def handle(request: Request) -> Response:
        if state.draining:
            raise APIError(503, "the server is shutting down", retry_after=RETRY_AFTER_FULL)
        job = await prepare_request(state, request, lambda body, stop: _parse(state, body, chat, stop))
        writer = OpenAIWriter(Answer(state.served.name, chat=chat), job, lambda t: state.runtime.detokenize([t]))
        return await answer(state, request, job, writer)

    return handle


def _messages_handler(state: ServerState):
    """Anthropic's Messages API: the request as a chat request, the answer in Anthropic's shapes
    (errors too: {"type": "error", "error": {...}})."""
    async def handle(request: Request) -> Response:
        try:
            if state.draining:
                raise APIError(503, "the server is shutting down", retry_after=RETRY_AFTER_FULL)
            job, stops = await prepare_request(state, request, lambda body, stop: _parse_messages(state, body, stop))
            return await answer(state, request, job, AnthropicWriter(job, state.served.name, stops))
        except Exception as e:
            return _anthropic_error(request, e)

    return handle


def _anthropic_error(request: Request, e: Exception) -> Response:
    """An Anthropic route's error in Anthropic's shape, a bug's 500 included (issue 41: they came
    in OpenAI's); a client that left or a server stopping are answered as on every route."""
    if isinstance(e, (ClientGone, ServerStopping)):
        raise e
    if not isinstance(e, APIError):
        traceback.print_exception(e, file=sys.stderr)
        e = APIError(500, f"internal server error ({type(e).__name__})")
    e = renamed(e, ANTHROPIC_NAMES)
    retry = {"Retry-After": str(e.retry_after)} if e.retry_after is not None else None
    return JSONResponse(anthropic.error_body(e), status_code=e.status, headers=retry)


def _parse_messages(state: ServerState, body: object, stop: Callable[[], bool]) -> tuple[Job, tuple[str, ...]]:
    chat = anthropic.chat_request(body)
    job = checked(state, lambda: parse_chat(chat, state.served, SessionTemplate(state.runtime, stop)), "messages")
    stops = chat.get("stop") or ()
    return job, tuple(stops) if isinstance(stops, list) else (stops,)


def _count_tokens_handler(state: ServerState):
    """POST /v1/messages/count_tokens: the prompt's tokens, as Claude Code asks before sending."""
    async def handle(request: Request) -> Response:
        try:
            count = await prepare_request(state, request, lambda body, stop: chat_prompt_tokens(
                anthropic.chat_request(body), state.served, SessionTemplate(state.runtime, stop, bounded=False)))
            return JSONResponse({"input_tokens": count})
        except Exception as e:
            return _anthropic_error(request, e)

    return handle


def _responses_handler(state: ServerState):
    """OpenAI's Responses API: the request as a chat request, the answer as a Response."""
    async def handle(request: Request) -> Response:
        if state.draining:
            raise APIError(503, "the server is shutting down", retry_after=RETRY_AFTER_FULL)
        try:
            job, names = await prepare_request(state, request, lambda body, stop: _parse_responses(state, body, stop))
        except APIError as e:
            raise renamed(e, RESPONSES_NAMES) from None
        return await answer(state, request, job, ResponsesWriter(job, state.served.name, names))

    return handle


def _parse_responses(state: ServerState, body: object, stop: Callable[[], bool]) -> tuple[Job, openai_responses.Names]:
    chat, names = openai_responses.parse(body)
    return checked(state, lambda: parse_chat(chat, state.served, SessionTemplate(state.runtime, stop)), "input"), names


async def prepare_request(state: ServerState, request: Request, parse: Callable[[object, Callable[[], bool]], T]) -> T:
    """What every generating route does first: the body read (413 past --max-body), then decoded
    and turned into what the engine runs by parse(body, stop) on a preparing thread (prepare.py:
    bounded threads, dropped when the client leaves or the server stops; `stop()` says so)."""
    raw = await unless_stopping(state.stopping, read_body(request, state.max_body))
    return await state.preparer.run(lambda stop: parse(body_json(raw), stop), len(raw), request, state.stopping.begun)


def _parse(state: ServerState, body: object, chat: bool, stop: Callable[[], bool]) -> Job:
    """The request as the engine will run it; every reason it cannot run is a 400 now, not later."""
    runtime, served = state.runtime, state.served
    if chat:
        return checked(state, lambda: parse_chat(body, served, SessionTemplate(runtime, stop)), "messages")
    return checked(state, lambda: parse_completion(body, served, lambda text: runtime.tokenize(text, stop=stop)), "prompt")


def checked(state: ServerState, parse: Callable[[], Job], prompt_param: str) -> Job:
    """parse(), then the engine's own check; their SpecllamaErrors are the client's 400s."""
    try:
        job = parse()
        state.runtime.check(EngineRequest(job.prompt, job.config))
    except ContextOverflowError as e:
        raise invalid(str(e), prompt_param, code="context_length_exceeded") from None
    except GrammarFault as e:  # the request's grammar: its tools' or its response_format's
        if job.tools is not None and job.config.constraint and job.config.constraint.kind == "lark":
            raise _tool_fault(job, e) from None
        raise invalid(str(e), "response_format") from None
    except SpecllamaError as e:  # a chat template that fails to render, a drafter that needs a cost curve
        raise invalid(str(e)) from None
    return job


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


def renamed(error: APIError, names: dict[str, str]) -> APIError:
    """An error of the chat request a route was translated into, told in the route's own field
    names (Responses: max_output_tokens, input; Anthropic: stop_sequences), issue 41."""
    param, message = error.param, error.message
    for ours, theirs in names.items():
        if param is not None and (param == ours or param.startswith(ours + ".")):  # not [i]: items are counted apart
            param = theirs + param[len(ours):]
        message = message.replace(f"'{ours}'", f"'{theirs}'")
    if (param, message) == (error.param, error.message):
        return error
    return APIError(error.status, message, param=param, code=error.code, retry_after=error.retry_after)


RESPONSES_NAMES = {"max_tokens": "max_output_tokens", "messages": "input"}
ANTHROPIC_NAMES = {"stop": "stop_sequences"}


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

    def sink(event) -> None:  # called in the engine thread
        if wants_tokens or not isinstance(event, TokenEvent):
            try:
                loop.call_soon_threadsafe(events.put_nowait, event)
            except RuntimeError:  # the event loop has closed: the server is gone
                pass

    route = request.url.path
    try:
        tag = state.worker.submit(job.prompt, job.config, sink)
    except QueueFull:
        state.metrics.finished("refused")
        log_request(route, 503, None)
        raise APIError(503, "the server is busy: every slot is taken and the queue is full; try again shortly",
                       retry_after=RETRY_AFTER_FULL) from None
    except ShuttingDown:
        raise APIError(503, "the server is shutting down", retry_after=RETRY_AFTER_FULL) from None
    if job.stream:
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(_stream(state, request, tag, events, job, writer), media_type="text/event-stream",
                                 headers=headers)
    tokens: list[TokenEvent] = []
    while True:
        event = await _next_event(request, events, state.stopping.give_up)
        if not isinstance(event, TokenEvent):
            break
        tokens.append(event)
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
    finished = False
    route = request.url.path
    try:
        for line in writer.opening():
            yield line
        while True:
            event = await _next_event(request, events, state.stopping.give_up)
            if event is None:
                log_request(route, 499, None)
                return  # the client left (finally cancels its request)
            if event is GAVE_UP:  # the engine did not end it in time: end the stream here
                for line in writer.failed(_failure(state, event)):
                    yield line
                log_request(route, 503, None)
                return
            if isinstance(event, TokenEvent):
                for line in writer.token(event):
                    yield line
                continue
            finished = True
            if isinstance(event, DoneEvent):
                for line in writer.done(event):
                    yield line
                log_request(route, 503 if event.summary.finish_reason == "cancelled" else 200, event.summary,
                            job.requested_max_tokens, job.config.max_tokens)
            else:
                error = _failure(state, event)
                for line in writer.failed(error):
                    yield line
                log_request(route, error.status, None)
            return
    finally:
        if not finished:
            state.worker.cancel(tag)


async def _next_event(request: Request, events: asyncio.Queue, give_up: asyncio.Event):
    """The request's next event; None when the client disconnects first, GAVE_UP when the server
    stopped long enough ago that it answers without waiting for the engine any more."""
    if not events.empty():
        return events.get_nowait()
    get = asyncio.ensure_future(events.get())
    gone = asyncio.ensure_future(disconnected(request))
    stop = asyncio.ensure_future(give_up.wait())
    try:
        done, _ = await asyncio.wait({get, gone, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (get, gone, stop):
            task.cancel()
    if get in done:
        return get.result()
    return None if gone in done else GAVE_UP


def _models(state: ServerState) -> dict:
    served = state.served
    return {"object": "list", "data": [{"id": served.name, "object": "model", "created": int(state.started),
                                        "owned_by": "specllama",
                                        "meta": {"n_ctx": served.n_ctx, "drafters": list(served.drafters)}}]}


def _model(state: ServerState, model_id: str) -> Response:
    state.served.check_model({"model": model_id})  # 404 for another name
    return JSONResponse(_models(state)["data"][0])


def _props(state: ServerState) -> dict:
    """llama-server's /props fields that `specllama batch --server` reads (total_slots: its concurrency)."""
    runtime = state.runtime
    info = runtime.describe()
    return {"total_slots": runtime.parallelism, "model_path": str(info.target.path),
            "draft_model_path": str(info.draft.path) if info.draft else None,  # `specllama ps` shows it
            "n_ctx": state.served.n_ctx, "drafters": list(state.served.drafters)}


def _health(state: ServerState) -> Response:
    """Answered without a key, so it says the server's state and counts, never an error's text (a
    dead engine's error once carried a client's whole grammar here, issue 41): "ok" (llama-server's
    word; `specllama ps` and load balancers read it), "busy" (every slot taken: a request waits), or
    "stopping" (503: draining, or the engine died and the process is exiting)."""
    if not state.worker.alive or state.draining:
        return JSONResponse({"status": "stopping"}, 503)
    active, queued = state.worker.counts()
    slots = state.runtime.parallelism
    status = "busy" if active >= slots or queued else "ok"
    return JSONResponse({"status": status, "slots": slots, "active": active, "queued": queued})


def _metrics(state: ServerState) -> Response:
    active, queued = state.worker.counts()
    preparer = state.preparer
    return PlainTextResponse(state.metrics.render(active, queued, sum(preparer.counts()), preparer.abandoned),
                             media_type="text/plain; version=0.0.4")


def _http_error(request: Request, e: HTTPException) -> Response:
    """Starlette's own 404 / 405 in OpenAI's shape."""
    message = f"no route {request.method} {request.url.path}" if e.status_code in (404, 405) else str(e.detail)
    return APIError(e.status_code, message).response()


def _internal_error(request: Request, e: Exception) -> Response:
    """A bug: the client gets a one-line 500, the server's log the traceback."""
    traceback.print_exception(e, file=sys.stderr)
    return APIError(500, f"internal server error ({type(e).__name__})").response()
