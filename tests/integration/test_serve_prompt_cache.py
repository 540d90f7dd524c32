"""`specllama serve`'s prompt cache end to end (issue 39 item 4): a long prefix another request took
the slot from comes back from memory, and after a restart from disk, said in the request log
("cached N from disk"), the usage (OpenAI's cached_tokens, Anthropic's cache_read_input_tokens),
/metrics and `specllama ps`; and a stream waiting with nothing to send gets keep-alives.
Live servers on a tiny model (127.0.0.1), the cache in a scratch folder."""

from __future__ import annotations

import json
import threading
import time

import pytest

from specllama.cli import cmd_ps
from tests.support.live_serve import LiveServer
from tests.support.tiny_gguf import write_tiny_model

SYSTEM = " ".join(f"Rule {i}: keep the answer about topic {i * 7 % 13} short and exact." for i in range(60))


@pytest.fixture(scope="module")
def long_model(tmp_path_factory, tokenizer_sources):
    return write_tiny_model(tmp_path_factory.mktemp("spc") / "long.gguf", tokenizer_sources["qwen"], seed=5, n_ctx=4096)


def start(model, tmp_path, name: str, *extra: str) -> LiveServer:
    return LiveServer(["--target", str(model), "--no-draft", "--ctx", "4096", "--parallel", "1", "--max-tokens", "8",
                       "--cache-ram", "64", "--cache-disk", "64", *extra], tmp_path / f"{name}.log",
                      env={"SPECLLAMA_PROMPT_CACHE": str(tmp_path / "cache")})


def message(server: LiveServer, user: str) -> dict:
    body = json.dumps({"model": "x", "max_tokens": 8, "system": SYSTEM, "temperature": 0,
                       "messages": [{"role": "user", "content": user}]}).encode()
    status, _, data = server.request("POST", "/v1/messages", body)
    assert status == 200, data
    return json.loads(data)


def test_a_long_prefix_comes_back_from_memory_and_after_a_restart_from_disk(long_model, tmp_path):
    server = start(long_model, tmp_path, "first")
    try:
        first = message(server, "Question one?")
        client = server.client()
        client.completions.create(model="x", prompt="Something else entirely. " * 80, max_tokens=4)  # takes the slot
        again = message(server, "Question two, a little longer?")
        metrics = server.metrics()
        ps = cmd_ps.text(cmd_ps.summary({"url": server.url, "health": {"status": "ok"}, "props": {},
                                         "metrics": cmd_ps.parse_metrics(server.get("/metrics")[2].decode())}))
    finally:
        assert server.stop() == 0
    log = server.stderr()
    assert first["usage"]["cache_read_input_tokens"] == 0 and first["usage"]["input_tokens"] > 300
    assert again["usage"]["cache_read_input_tokens"] > 300
    assert "from memory)" in log and "Traceback" not in log
    assert metrics['specllama_prompt_cache_hits_total{where="memory"}'] == 1
    assert "cache      memory: " in ps and "1 hit(s)" in ps and "cache      disk: 2 prompt(s)" in ps, ps

    server = start(long_model, tmp_path, "second")
    try:
        after = message(server, "Question three?")
        chat = server.client().chat.completions.create(
            model="x", max_tokens=4, temperature=0,
            messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": "And four?"}])
    finally:
        assert server.stop() == 0
    log = server.stderr()
    assert after["usage"]["cache_read_input_tokens"] > 300 and "from disk)" in log, log[-2000:]
    assert chat.usage.prompt_tokens_details.cached_tokens > 300


def raw_stream(server: LiveServer, path: str, body: dict, out: list[bytes]) -> None:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    response = conn.getresponse()
    while chunk := response.read1(65536):
        out.append(chunk)
    conn.close()


def hold_the_slot(server: LiveServer) -> threading.Thread:
    """A long answer streaming in the one slot (the thread that reads it), once it is active."""
    busy = threading.Thread(target=raw_stream, args=(server, "/v1/completions", {
        "model": "x", "prompt": "Go on:", "max_tokens": 3000, "stream": True}, []))
    busy.start()
    deadline = time.monotonic() + 60
    while json.loads(server.get("/health")[2]).get("active") != 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    return busy


# Each an event of its API (not an SSE comment): Qwen Code and Codex end a stream after 240 / 300 s without an event,
# and a cold agent prompt can take longer to prefill on a CPU. Chat's is a chunk with an empty delta, completions' one
# with empty text, Responses' its in_progress event again, Anthropic's its ping event.
@pytest.mark.parametrize("path, body, keep_alive", [
    ("/v1/chat/completions", {"stream": True, "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]},
     b'"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":null}]}\n\n'),
    ("/v1/completions", {"stream": True, "max_tokens": 4, "prompt": "Hi"},
     b'"choices":[{"index":0,"text":"","logprobs":null,"finish_reason":null}]}\n\n'),
    ("/v1/responses", {"stream": True, "max_output_tokens": 4, "input": "Hi"}, b"event: response.in_progress\n"),
    ("/v1/messages", {"stream": True, "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]},
     b"event: ping\ndata: {\"type\":\"ping\"}\n\n"),
])
def test_a_stream_waiting_for_its_slot_sends_keep_alives(long_model, tmp_path, path, body, keep_alive):
    """A stream whose request waits (here for the one slot, held by a long answer; in life for a
    long prefill) sends keep-alives in its API's form until its first token."""
    server = start(long_model, tmp_path, "keep", "--keep-alive", "0.1", "--max-tokens", "3000")
    try:
        busy = hold_the_slot(server)
        out: list[bytes] = []
        raw_stream(server, path, {"model": "x", **body}, out)
        busy.join(120)
    finally:
        assert server.stop() == 0
    stream = b"".join(out)
    # (Anthropic's stream opens with one ping of its own, Responses' with one in_progress event)
    assert stream.count(keep_alive) >= 3, stream[:600]
    assert b": keep-alive" not in stream


def test_the_sdks_take_the_keep_alives_as_events_that_add_nothing(long_model, tmp_path):
    """What a client built on the SDKs sees of them while it waits: chat chunks with an empty delta, Responses'
    in_progress events; the answer they then assemble is the same as without the wait."""
    server = start(long_model, tmp_path, "sdk", "--keep-alive", "0.1", "--max-tokens", "3000")
    client = server.client()
    ask = {"model": "x", "temperature": 0}
    try:
        alone = client.chat.completions.create(**ask, max_tokens=6, messages=[{"role": "user", "content": "Hi"}])
        busy = hold_the_slot(server)
        chunks = list(client.chat.completions.create(**ask, max_tokens=6, stream=True,
                                                     messages=[{"role": "user", "content": "Hi"}]))
        busy.join(120)
        busy = hold_the_slot(server)
        events = list(client.responses.create(model="x", temperature=0, max_output_tokens=6, input="Hi", stream=True))
        busy.join(120)
    finally:
        assert server.stop() == 0
    empty = [c for c in chunks if c.choices and c.choices[0].delta.content is None and c.choices[0].finish_reason is None]
    assert len(empty) >= 3
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == alone.choices[0].message.content
    kinds = [e.type for e in events]
    assert kinds.count("response.in_progress") >= 3 and kinds[-1] == "response.incomplete"  # (max_output_tokens)
    assert events[-1].response.output_text == alone.choices[0].message.content
