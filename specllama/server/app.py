"""The HTTP side: the routes over the engine worker (each API's handler in api/, the exchange they
share in exchange.py), the API key check, and the model, health and metrics routes.

Why Starlette and not FastAPI: the API is six routes, and OpenAI's clients expect OpenAI's error
JSON for every malformed body, which is what schema.py writes by hand; FastAPI's model validation
would answer 422 in its own shape and need overriding field by field.
"""

from __future__ import annotations

import hmac
import sys
import traceback

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from specllama.server.api import anthropic, openai_chat, openai_responses
from specllama.server.api_errors import APIError
from specllama.server.browser_guard import BrowserGuard, allowed_hosts
from specllama.server.exchange import RETRY_AFTER_FULL, ServerState
from specllama.server.prepare import ClientGone, ServerStopping

OPEN_PATHS = ("/health", "/v1/health")  # answered without the API key (load balancers probe them)
LOCAL_ORIGINS = r"https?://(localhost|127\.0\.0\.1|\[::1\])(:\d+)?"  # CORS: pages served from this machine


def create_app(state: ServerState, api_key: str | None = None, cors: tuple[str, ...] = (),
               hosts: frozenset[str] | None = allowed_hosts("127.0.0.1")) -> Starlette:
    """The routes; the key check (when a key is set) inside CORS, so a browser's preflight, which
    carries no key, is answered; outside both, the Origin and Host checks (browser_guard.py;
    `hosts`: the Host names answered, None for any)."""
    routes = [
        Route("/v1/chat/completions", openai_chat.handler(state, chat=True), methods=["POST"]),
        Route("/v1/completions", openai_chat.handler(state, chat=False), methods=["POST"]),
        Route("/v1/messages", anthropic.messages_handler(state), methods=["POST"]),
        Route("/v1/messages/count_tokens", anthropic.count_tokens_handler(state), methods=["POST"]),
        Route("/v1/responses", openai_responses.handler(state), methods=["POST"]),
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
    report = getattr(state.runtime, "prompt_cache_report", None)
    return PlainTextResponse(state.metrics.render(active, queued, sum(preparer.counts()), preparer.abandoned,
                                                  report() if report is not None else None),
                             media_type="text/plain; version=0.0.4")


def _http_error(request: Request, e: HTTPException) -> Response:
    """Starlette's own 404 / 405 in OpenAI's shape."""
    message = f"no route {request.method} {request.url.path}" if e.status_code in (404, 405) else str(e.detail)
    return APIError(e.status_code, message).response()


def _internal_error(request: Request, e: Exception) -> Response:
    """A bug: the client gets a one-line 500, the server's log the traceback."""
    traceback.print_exception(e, file=sys.stderr)
    return APIError(500, f"internal server error ({type(e).__name__})").response()
