"""Issue 41: no request can kill the engine. Each schema from the hostile afternoon (they made
llguidance raise at decode time and the engine thread died: every later request and /health got
503 with the process up) and injected faults (a bug in one request's slot, one in its grammar at
decode time) go through a live `specllama serve` (tiny model, 127.0.0.1) while a stream runs beside
them: that request alone fails, with a clear error; the stream beside it ends as it would have;
/health stays "ok" and says nothing else; the next request is answered. If the engine thread
itself dies, the process exits non-zero (a supervisor restarts it), and no client is told another
request's content.

Faults are injected with a sitecustomize module put first on the server's PYTHONPATH: it wraps a
method so that requests asking for a magic max_tokens fail inside the engine."""

from __future__ import annotations

import json
import threading

import pytest

from tests.support.live_serve import REPO, LiveServer, chat_body

LONG = 400  # tokens: the stream beside the bad request (the tiny model never ends a turn on its own)
SLOT_BUG, GRAMMAR_BUG, ENGINE_BUG = 77, 78, 79  # max_tokens values the injected faults react to

FAULTS = f'''
from specllama.decoding import grammar, slot
from specllama.server import worker

_emit = slot.Slot.emit
def emit(self, *args, **kwargs):
    if self.config.max_tokens == {SLOT_BUG}:
        raise ZeroDivisionError("injected bug in one slot")
    return _emit(self, *args, **kwargs)
slot.Slot.emit = emit

_mask = grammar.Guide.mask
def mask(self, *args, **kwargs):
    if getattr(self, "bug", False):
        raise RuntimeError("parser error: Too many items (limit 50000; ff_tokens) SECRET-GRAMMAR-TEXT")
    return _mask(self, *args, **kwargs)
grammar.Guide.mask = mask
_guide_for = grammar.guide_for
def guide_for(constraint, model, drafts):
    guide = _guide_for(constraint, model, drafts)
    if guide is not None and constraint.schema and constraint.schema.get("title") == "bug":
        guide.bug = True
    return guide
grammar.guide_for = guide_for
import specllama.decoding.engine as engine
engine.guide_for = guide_for

_route = worker.EngineWorker._route
def route(self, tag, event):
    summary = getattr(event, "summary", None)
    if summary is not None and summary.tokens == {ENGINE_BUG}:
        raise MemoryError("SECRET-PROMPT-TEXT")
    return _route(self, tag, event)
worker.EngineWorker._route = route
'''

RECURSIVE_ARRAY = {"$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}, "minItems": 1}}, "$ref": "#/$defs/a"}
SELF_NEXT = {"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]}
A_B_A = {"$defs": {"a": {"type": "object", "properties": {"b": {"$ref": "#/$defs/b"}}, "required": ["b"]},
                   "b": {"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "required": ["a"]}},
         "$ref": "#/$defs/a"}
WIDE_ANY_OF = {"anyOf": [{"type": "object", "properties": {f"k{i}": {"type": "integer"}}, "required": [f"k{i}"]}
                         for i in range(2001)]}


@pytest.fixture(scope="module")
def server(tiny_models, tmp_path_factory):
    folder = tmp_path_factory.mktemp("faults")
    (folder / "sitecustomize.py").write_text(FAULTS)
    live = LiveServer(["--target", str(tiny_models["a"]), "--no-draft", "--ctx", "2048", "--parallel", "2"],
                      folder / "serve.log", api_key="k", env={"PYTHONPATH": f"{folder}:{REPO}"})
    yield live
    assert live.stop() == 0, live.stderr()[-3000:]


def _schema(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": True}}


class Beside:
    """A long stream running while the bad request is served; `finish()` waits for its end."""

    def __init__(self, live: LiveServer):
        self.chunks: list[dict] = []
        self.started = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(live,), daemon=True)
        self.thread.start()
        assert self.started.wait(60), "the stream beside never started"

    def _run(self, live: LiveServer) -> None:
        try:
            stream = live.client().chat.completions.create(
                model="a", messages=[{"role": "user", "content": "Talk for a long time."}], max_tokens=LONG,
                stream=True, temperature=0, stream_options={"include_usage": True})
            for chunk in stream:
                self.chunks.append(chunk)
                if len(self.chunks) >= 3:
                    self.started.set()
        except BaseException as e:  # noqa: BLE001 (reported by finish())
            self.error = e
        finally:
            self.started.set()

    def finish(self) -> None:
        self.thread.join(120)
        assert self.error is None, self.error
        finishes = [c.choices[0].finish_reason for c in self.chunks if c.choices and c.choices[0].finish_reason]
        assert finishes == ["length"] and self.chunks[-1].usage.completion_tokens == LONG


def _healthy(live: LiveServer) -> None:
    status, _, data = live.request("GET", "/health", auth=False)
    health = json.loads(data)
    assert status == 200 and health["status"] in ("ok", "busy") and set(health) <= {"status", "slots", "active",
                                                                                       "queued"}, health
    reply = live.client().chat.completions.create(model="a", messages=[{"role": "user", "content": "hi"}], max_tokens=3)
    assert reply.usage.completion_tokens == 3


@pytest.mark.parametrize("schema, named", [(RECURSIVE_ARRAY, "#/$defs/a"), (SELF_NEXT, "'#'"), (A_B_A, "#/$defs/"),
                                           (WIDE_ANY_OF, "max is 2000")],
                         ids=["recursive-array", "self-next", "a-b-a", "anyOf-2001"])
def test_a_schema_the_grammar_engine_cannot_finish_is_refused_and_the_engine_goes_on(server, schema, named):
    beside = Beside(server)
    status, _, data = server.request("POST", "/v1/chat/completions",
                                     chat_body("a", "JSON", max_tokens=50, response_format=_schema(schema)))
    error = json.loads(data)["error"]
    assert status == 400 and named in error["message"] and error["param"] == "response_format", error
    beside.finish()
    _healthy(server)


def test_a_recursive_tool_schema_is_refused_too(server):
    tool = {"type": "function", "function": {"name": "walk", "parameters": SELF_NEXT}}
    status, _, data = server.request("POST", "/v1/chat/completions",
                                     chat_body("a", "walk", max_tokens=50, tools=[tool], tool_choice="required"))
    error = json.loads(data)["error"]
    assert status == 400 and "no finite instance" in error["message"], error
    assert error["param"] == "tools[0].function.parameters"


@pytest.mark.parametrize("stream", [False, True])
def test_a_bug_in_one_requests_slot_fails_that_request_alone(server, stream):
    beside = Beside(server)
    body = chat_body("a", "hi", max_tokens=SLOT_BUG, stream=stream)
    status, _, data = server.request("POST", "/v1/chat/completions", body)
    text = data.decode()
    if stream:  # the stream had begun: its error is an event, then [DONE]
        assert status == 200 and '"error"' in text and text.rstrip().endswith("data: [DONE]")
    else:
        assert status == 500
    assert "ZeroDivisionError: injected bug in one slot" in text
    beside.finish()
    _healthy(server)


def test_a_grammar_failing_at_decode_time_fails_its_request_alone(server):
    beside = Beside(server)
    fmt = _schema({"title": "bug", "type": "object", "properties": {"a": {"type": "integer"}}})
    status, _, data = server.request("POST", "/v1/chat/completions", chat_body("a", "x", max_tokens=20, response_format=fmt))
    error = json.loads(data)["error"]
    assert status == 500 and "Too many items" in error["message"], error
    beside.finish()
    _healthy(server)
    status, _, data = server.request("GET", "/health", auth=False)
    assert b"SECRET" not in data


def test_when_the_engine_thread_dies_the_server_exits_non_zero_and_tells_nobody_anyone_elses_text(tiny_models, tmp_path):
    (tmp_path / "sitecustomize.py").write_text(FAULTS)
    live = LiveServer(["--target", str(tiny_models["a"]), "--no-draft", "--ctx", "2048", "--parallel", "2"],
                      tmp_path / "serve.log", env={"PYTHONPATH": f"{tmp_path}:{REPO}"})
    try:
        beside = Beside(live)
        status, _, data = live.request("POST", "/v1/chat/completions", chat_body("a", "hi", max_tokens=ENGINE_BUG))
        assert status in (500, 503) and b"SECRET" not in data
        beside.thread.join(60)
        seen = json.dumps([c.model_dump() for c in beside.chunks]) + repr(beside.error)
        assert "SECRET" not in seen
        assert live.proc.wait(timeout=30) == 3  # ENGINE_DIED: not a clean stop
    finally:
        live.stop()
    assert "the engine stopped" in live.stderr()


def test_health_is_open_and_says_only_the_state(server):
    status, _, data = server.request("GET", "/health", auth=False)
    assert status == 200 and set(json.loads(data)) == {"status", "slots", "active", "queued"}

