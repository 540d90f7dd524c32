"""`specllama serve` under faults: clients that leave, a full queue, SIGTERM / Ctrl-C mid-stream.
Each test starts its own live server (tiny model, 127.0.0.1) because each ends or fills it."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time

import openai
import pytest

from tests.support.live_serve import LiveServer, chat_body, outcomes, wait_for
from tests.support.tiny_gguf import write_tiny_model

LONG = 3000  # tokens: a generation still running when the test acts on it (the engine stops it early)


def tiny_server(tiny_models, tmp_path, *extra: str) -> LiveServer:
    return LiveServer(["--target", str(tiny_models["a"]), "--no-draft", "--ctx", "4096", *extra],
                      tmp_path / "serve.log")


def long_stream(live: LiveServer):
    return live.client().chat.completions.create(
        model="a", messages=[{"role": "user", "content": "Talk for a long time."}], max_tokens=LONG, stream=True)


def test_a_client_leaving_mid_stream_frees_its_slot_for_the_next(tiny_models, tmp_path):
    live = tiny_server(tiny_models, tmp_path, "--parallel", "1")
    try:
        stream = long_stream(live)
        got = [next(iter(stream)) for _ in range(5)]
        assert got
        stream.close()  # the connection goes away mid-generation
        wait_for(lambda: outcomes(live).get("cancelled") == 1, what="the request to be cancelled")
        reply = live.client().chat.completions.create(model="a", messages=[{"role": "user", "content": "hi"}],
                                                      max_tokens=4)
        assert reply.usage.completion_tokens >= 1
        m = live.metrics()
        # The left request stopped early: with one slot, the next could only have run after it otherwise.
        assert m["specllama_generated_tokens_total"] < LONG
        assert m["specllama_requests_active"] == 0 and outcomes(live).get("length", 0) + outcomes(live).get("stop", 0) == 1
    finally:
        assert live.stop() == 0


def test_a_client_leaving_mid_stream_is_a_499_line_in_the_request_log(tiny_models, tmp_path):
    # Agents that give up on a long prefill and retry (Qwen Code after 240 s without an event) left no line at all:
    # the request log, the evidence agents_e2e.py reads, showed neither the abandoned request nor why the retry came.
    live = tiny_server(tiny_models, tmp_path, "--parallel", "1")
    try:
        stream = long_stream(live)
        assert [next(iter(stream)) for _ in range(3)]
        stream.close()
        wait_for(lambda: outcomes(live).get("cancelled") == 1, what="the request to be cancelled")
        wait_for(lambda: "POST /v1/chat/completions 499" in live.log.read_text(), what="the 499 line")
    finally:
        assert live.stop() == 0
    assert live.log.read_text().count("POST /v1/chat/completions 499") == 1


def test_a_client_leaving_a_silent_stream_is_seen_at_once(tokenizer_sources, tmp_path):
    # A stream with nothing to send yet (a long prompt's prefill, a wait for the slot) used to learn that its client
    # had gone only from its second keep-alive write: 20 s at the default --keep-alive, in which an agent's abandoned
    # prefill went on holding the one slot (aider waited behind Qwen Code's in the end-to-end runs). Here the wait is
    # for the slot, behind a generation of 12,000 tokens; --keep-alive 60 puts the old behaviour at 120 s, or at the
    # slot's release, both far past the wait below.
    model = write_tiny_model(tmp_path / "long.gguf", tokenizer_sources["qwen"], seed=0, n_ctx=16384)
    live = LiveServer(["--target", str(model), "--no-draft", "--ctx", "16384", "--parallel", "1", "--keep-alive", "60"],
                      tmp_path / "serve.log")
    try:
        holder = live.client().chat.completions.create(
            model="a", messages=[{"role": "user", "content": "Talk for a long time."}], max_tokens=12000, temperature=0,
            stream=True)
        next(iter(holder))  # holds the one slot
        with socket.create_connection(("127.0.0.1", live.port)) as sock:
            body = chat_body("a", "Talk for a long time.", max_tokens=LONG, stream=True)
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            wait_for(lambda: live.metrics()["specllama_requests_queued"] == 1, what="a queued request")
            # Its headers and first chunk are written, then nothing. All of it is read, so the close below is a clean
            # end-of-file, as when an agent gives up: closing with unread data sends a reset, which was always seen.
            assert b'"role":"assistant"' in read_until_quiet(sock).replace(b" ", b"")
        wait_for(lambda: live.metrics()["specllama_requests_queued"] == 0, timeout=10, what="the left request to go")
        wait_for(lambda: "POST /v1/chat/completions 499" in live.log.read_text(), what="the 499 line")
        assert live.metrics()["specllama_requests_active"] == 1  # the holder still runs: the slot never freed
        holder.close()
    finally:
        assert live.stop() == 0


def read_until_quiet(sock: socket.socket, quiet: float = 0.5) -> bytes:
    sock.settimeout(quiet)
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except TimeoutError:
        pass
    return got


def test_a_client_leaving_a_whole_request_cancels_it(tiny_models, tmp_path):
    live = tiny_server(tiny_models, tmp_path, "--parallel", "1")
    try:
        with socket.create_connection(("127.0.0.1", live.port)) as sock:
            body = chat_body("a", "Talk for a long time.", max_tokens=LONG)
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            wait_for(lambda: live.metrics()["specllama_generated_tokens_total"] > 0, what="generation to start")
        wait_for(lambda: outcomes(live).get("cancelled") == 1, what="the request to be cancelled")
        assert live.metrics()["specllama_generated_tokens_total"] < LONG
    finally:
        assert live.stop() == 0


def test_a_full_queue_answers_503_with_retry_after(tiny_models, tmp_path):
    live = tiny_server(tiny_models, tmp_path, "--parallel", "1", "--queue", "1")
    try:
        stream = long_stream(live)
        next(iter(stream))  # holds the one slot
        waiting = {}
        thread = threading.Thread(target=lambda: waiting.update(reply=live.client().chat.completions.create(
            model="a", messages=[{"role": "user", "content": "hi"}], max_tokens=4)))
        thread.start()
        wait_for(lambda: live.metrics()["specllama_requests_queued"] == 1, what="a queued request")
        status, headers, data = live.request("POST", "/v1/chat/completions", chat_body("a", "hi", max_tokens=4))
        assert status == 503 and int(headers["retry-after"]) >= 1
        assert json.loads(data)["error"]["type"] == "server_error"
        stream.close()  # frees the slot: the queued request runs
        thread.join(30)
        assert waiting["reply"].usage.completion_tokens >= 1
        assert outcomes(live)["refused"] == 1
    finally:
        assert live.stop() == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_streams_cleanly_and_exits_0(tiny_models, tmp_path, sig):
    """A running stream ends with an error event and [DONE] (the client raises, it does not hang),
    a running whole request gets 503 (batch --server retries it elsewhere), the process exits 0."""
    live = tiny_server(tiny_models, tmp_path, "--parallel", "2")
    stream = long_stream(live)
    chunks = iter(stream)
    next(chunks)
    whole = {}

    def ask_whole():
        try:
            live.client().chat.completions.create(model="a", messages=[{"role": "user", "content": "Go on."}],
                                                  max_tokens=LONG)
        except openai.APIStatusError as e:
            whole["status"] = e.status_code

    thread = threading.Thread(target=ask_whole)
    thread.start()
    wait_for(lambda: live.metrics()["specllama_requests_active"] == 2, what="both requests running")
    started = time.monotonic()
    live.proc.send_signal(sig)
    with pytest.raises(openai.APIError, match="shutting down"):
        for _ in chunks:  # the rest of the stream, up to the server's closing error event
            pass
    thread.join(15)
    assert whole == {"status": 503}
    assert live.stop(timeout=15) == 0
    assert time.monotonic() - started < 15
    stderr = live.stderr()
    assert "Traceback" not in stderr and "specllama serve: stopped" in stderr


def test_a_taken_port_is_one_line_before_any_model_loads(tmp_path):
    """The target does not exist: had the models loaded first, the error would be about it."""
    import subprocess
    import sys

    from tests.support.live_serve import REPO

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "specllama", "serve", "--port", str(port),
                               "--target", str(tmp_path / "never-loaded.gguf")],
                              cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr  # 2 here, 1 under main's exit codes
    assert proc.stderr.strip().splitlines() == [f"specllama: error: cannot listen on 127.0.0.1:{port}: Address already in use"]
