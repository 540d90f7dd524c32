"""SIGTERM stops `specllama serve` cleanly whatever each open request is doing: exit 0 within 10 s,
OpenAI's error JSON (or, for a stream, an error event and [DONE]) to every client, and no call into
llama.cpp after its model is freed (issue 33: SIGTERM while a large chat was tokenized was a
SIGSEGV, exit 139, and its client got plain-text "Internal Server Error").

One server holds a request in each phase at the moment of the signal: a body still uploading, a
body being tokenized, a request waiting for a slot, a prompt being prefilled (30,000 tokens: some
seconds even on the tiny model, whose attention is the cost at that length), and a stream being
decoded. The tiny model here has a 32k context so that the prefill is long.
"""

from __future__ import annotations

import http.client
import json
import signal
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


def wait_for(predicate, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class Client(threading.Thread):
    """One request on its own connection; keeps the status and the whole body."""

    def __init__(self, live: LiveServer, path: str, body: bytes):
        super().__init__(daemon=True)
        self.live, self.path, self.body = live, path, body
        self.status: int | None = None
        self.data = b""
        self.error: Exception | None = None
        self.first_bytes = threading.Event()

    def run(self):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.live.port, timeout=60)
            conn.request("POST", self.path, self.body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            self.status = response.status
            while chunk := response.read1(65536):
                self.data += chunk
                self.first_bytes.set()
        except Exception as e:  # noqa: BLE001 - the test reads it
            self.error = e


def gauge(live: LiveServer, name: str) -> float:
    return live.metrics()[name]


def sse_events(data: bytes) -> list:
    lines = [line[len("data: "):] for line in data.decode().split("\n\n") if line.startswith("data: ")]
    return [line if line == "[DONE]" else json.loads(line) for line in lines]


def test_sigterm_in_every_phase_answers_everyone_and_exits_0(model_32k, tmp_path):
    live = LiveServer(["--target", str(model_32k), "--no-draft", "--ctx", str(CTX), "--parallel", "2", "--queue", "4"],
                      tmp_path / "serve.log")
    try:
        # decoding: a stream that runs for a long time
        decoding = Client(live, "/v1/chat/completions", chat_body("a32k", "Talk.", max_tokens=20000, stream=True))
        decoding.start()
        assert decoding.first_bytes.wait(30)
        wait_for(lambda: gauge(live, "specllama_generated_tokens_total") > 5, what="decoding")
        # prefilling: 30,000 prompt tokens, the second slot
        prompt = [(i * 7919) % 150000 for i in range(30000)]
        prefilling = Client(live, "/v1/completions", json.dumps({"model": "a32k", "prompt": prompt,
                                                                 "max_tokens": 5}).encode())
        prefilling.start()
        wait_for(lambda: gauge(live, "specllama_requests_active") == 2, what="the prefill to start")
        # queueing: both slots are held
        queued = Client(live, "/v1/chat/completions", chat_body("a32k", "Wait for me.", max_tokens=5))
        queued.start()
        wait_for(lambda: gauge(live, "specllama_requests_queued") == 1, what="a queued request")
        # tokenizing: 6 MB of text in thousands of pieces (each <tool_call> starts one)
        text = ("<tool_call>" + "words and more words " * 100) * 2800
        tokenizing = Client(live, "/v1/completions", json.dumps({"model": "a32k", "prompt": text,
                                                                 "max_tokens": 5}).encode())
        tokenizing.start()
        wait_for(lambda: gauge(live, "specllama_requests_preparing") == 1, what="a body being tokenized")
        # uploading: headers and half the body, the rest never comes
        body = chat_body("a32k", "x" * 1000)
        uploading = socket.create_connection(("127.0.0.1", live.port))
        uploading.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          + f"Content-Length: {len(body)}\r\n\r\n".encode() + body[:500])
        time.sleep(0.2)
        assert gauge(live, "specllama_requests_active") == 2  # the prefill still runs

        started = time.monotonic()
        live.proc.send_signal(signal.SIGTERM)
        returncode = live.proc.wait(timeout=15)
        took = time.monotonic() - started
        for client in (decoding, prefilling, queued, tokenizing):
            client.join(10)
        uploading.settimeout(5)
        upload_answer = uploading.recv(65536)
        uploading.close()
    finally:
        live.stop(timeout=5)

    assert returncode == 0, live.stderr()[-3000:]
    assert took < 10
    stderr = live.stderr()
    assert "Traceback" not in stderr and "Internal Server Error" not in stderr
    for name, client in (("prefilling", prefilling), ("queued", queued), ("tokenizing", tokenizing)):
        assert client.error is None, (name, client.error)
        assert client.status == 503, (name, client.status, client.data[:300])
        assert "shutting down" in json.loads(client.data)["error"]["message"], name
    assert decoding.error is None and decoding.status == 200
    events = sse_events(decoding.data)
    assert events[-1] == "[DONE]" and "shutting down" in events[-2]["error"]["message"]
    assert any(e != "[DONE]" and "choices" in e and e["choices"][0]["delta"].get("content") for e in events)
    assert upload_answer.startswith(b"HTTP/1.1 503")
    assert b"shutting down" in upload_answer
