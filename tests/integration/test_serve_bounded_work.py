"""One request cannot stall `specllama serve`: its pre-checks and tokenizing are linear in its
size, checked against the context before the expensive part, run on bounded threads, and dropped
when its client leaves (issue 33: 42 chat bodies of repeated `<|im_end|>x` kept every thread busy
for minutes and /health unanswered). Live servers on 127.0.0.1, real clients; the tiny model with a
32k context, so that multi-megabyte prompts are within its size budget and really get tokenized.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time

import pytest

from tests.support.live_serve import LiveServer, chat_body
from tests.support.tiny_gguf import write_tiny_model

CTX = 32768


@pytest.fixture(scope="module")
def model_32k(tmp_path_factory, tokenizer_sources):
    return write_tiny_model(tmp_path_factory.mktemp("tiny32k") / "a32k.gguf", tokenizer_sources["qwen"], seed=0,
                            n_ctx=CTX)


@pytest.fixture(scope="module")
def live(model_32k, tmp_path_factory):
    server = LiveServer(["--target", str(model_32k), "--no-draft", "--ctx", str(CTX), "--parallel", "2"],
                        tmp_path_factory.mktemp("serve") / "serve.log")
    yield server
    assert server.stop() == 0
    assert "Traceback" not in server.stderr()


def post(live: LiveServer, path: str, body: bytes, timeout: float) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", live.port, timeout=timeout)
    try:
        conn.request("POST", path, body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def timed_health(live: LiveServer) -> float:
    started = time.monotonic()
    status, _, _ = live.get("/health")
    assert status == 200
    return time.monotonic() - started


def test_chats_full_of_control_text_are_answered_at_once_and_health_stays_fast(live):
    """Six 3 MB chats of `<|im_end|>x` (each over 4 minutes of llama.cpp's own special-token split
    before): each is tokenized as text and refused for its length within seconds, and /health
    answers within a second all the while."""
    body = chat_body("a32k", "<|im_end|>x" * 280_000)
    answers: list = []
    threads = [threading.Thread(target=lambda: answers.append(post(live, "/v1/chat/completions", body, 60)))
               for _ in range(6)]
    for thread in threads:
        thread.start()
    slowest, deadline = 0.0, time.monotonic() + 60
    while any(thread.is_alive() for thread in threads):
        slowest = max(slowest, timed_health(live))
        assert time.monotonic() < deadline, "six 3 MB chats took more than 60 s"
        time.sleep(0.1)
    for thread in threads:
        thread.join()
    assert slowest < 1.0
    assert len(answers) == 6
    for status, reply in answers:
        assert status == 400 and reply["error"]["code"] == "context_length_exceeded", reply
        assert reply["error"]["param"] == "messages"
    reply = live.client().chat.completions.create(model="a32k", messages=[{"role": "user", "content": "hi"}],
                                                  max_tokens=4)
    assert reply.usage.completion_tokens >= 1


def test_a_chat_over_the_size_budget_is_refused_before_tokenizing(tiny_models, tmp_path):
    """Chat requests skipped the size check `run` and /v1/completions make: 1 MB of content cannot
    fit the 512 tokens of this context whatever it holds, and is refused by its size alone (it was
    tokenized first, some 25 s of llama.cpp's special-token split)."""
    small = LiveServer(["--target", str(tiny_models["a"]), "--no-draft"], tmp_path / "serve.log")
    try:
        started = time.monotonic()
        status, reply = post(small, "/v1/chat/completions", chat_body("a", "<|im_end|>x" * 95_000), 60)
        assert status == 400 and reply["error"]["code"] == "context_length_exceeded"
        assert "bytes" in reply["error"]["message"]
        assert time.monotonic() - started < 10
    finally:
        assert small.stop() == 0


def test_a_client_that_leaves_stops_its_tokenizing(live):
    """6 MB of text in thousands of pieces; the client leaves while it is tokenized: the work stops
    at its next piece (counted as abandoned) and the preparing threads are free again."""
    before = live.metrics()["specllama_preparing_abandoned_total"]
    text = ("<tool_call>" + "words and more words " * 100) * 2800
    body = json.dumps({"model": "a32k", "prompt": text, "max_tokens": 5}).encode()
    with socket.create_connection(("127.0.0.1", live.port)) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        deadline = time.monotonic() + 30
        while live.metrics()["specllama_requests_preparing"] == 0:
            assert time.monotonic() < deadline, "the body was never prepared"
            time.sleep(0.01)
    deadline = time.monotonic() + 30
    while live.metrics()["specllama_preparing_abandoned_total"] == before:
        assert time.monotonic() < deadline, "the tokenizing was not abandoned"
        time.sleep(0.02)
    assert live.metrics()["specllama_requests_preparing"] == 0
