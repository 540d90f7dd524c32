"""Requests at the edges of what `specllama serve` accepts (issue 33, items 3, 7 and 9): each gets
the answer an OpenAI client expects, never a 500, a traceback or silence. Live server on 127.0.0.1
with the tiny model; raw sockets where the case is about the connection itself."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from tests.support.live_serve import REPO, LiveServer, chat_body


@pytest.fixture(scope="module")
def live(tiny_models, tmp_path_factory):
    server = LiveServer(["--target", str(tiny_models["a"]), "--no-draft"], tmp_path_factory.mktemp("serve") / "serve.log")
    yield server
    assert server.stop() == 0


def error_of(reply: tuple[int, dict, bytes]) -> tuple[int, dict]:
    status, _, data = reply
    return status, json.loads(data)["error"]


def test_a_deeply_nested_body_is_400_without_a_traceback(live):
    status, error = error_of(live.request("POST", "/v1/chat/completions", b"[" * 100_000))
    assert status == 400 and "nests" in error["message"]
    status, error = error_of(live.request("POST", "/v1/completions", b'{"a":' * 50_000 + b"1" + b"}" * 50_000))
    assert status == 400
    assert "Traceback" not in live.stderr() and "RecursionError" not in live.stderr()


def test_best_of_other_than_1_is_refused_like_n(live):
    body = {"model": "a", "prompt": "Once", "max_tokens": 2}
    status, error = error_of(live.request("POST", "/v1/completions", json.dumps({**body, "best_of": 3}).encode()))
    assert status == 400 and error["param"] == "best_of"
    status, _, _ = live.request("POST", "/v1/completions", json.dumps({**body, "best_of": 1}).encode())
    assert status == 200


def test_top_p_0_is_the_most_likely_token_as_openai_takes_it(live):
    client = live.client()
    ask = dict(model="a", messages=[{"role": "user", "content": "Count."}], max_tokens=12)
    greedy = client.chat.completions.create(**ask, temperature=0)
    nucleus_of_one = client.chat.completions.create(**ask, temperature=1.0, top_p=0, seed=5)
    assert nucleus_of_one.choices[0].message.content == greedy.choices[0].message.content


def test_a_completion_prompt_too_long_names_the_prompt(live):
    body = json.dumps({"model": "a", "prompt": [1] * 600, "max_tokens": 2}).encode()
    status, error = error_of(live.request("POST", "/v1/completions", body))
    assert status == 400 and error["code"] == "context_length_exceeded" and error["param"] == "prompt"


def test_an_answer_cut_inside_a_character_has_no_replacement_character(live):
    """Sampled at temperature 2 with this seed, the tiny model's first token is the first byte of
    a multi-byte character: cut there by max_tokens 1, the content was U+FFFD. Held back now, as
    llama-server does. (Seeds that do so, found by trying each: 122, 238, 439, 503, 514 since the
    position-keyed draws of decoding/position_streams.py; 383 before.)"""
    client = live.client()
    ask = dict(model="a", messages=[{"role": "user", "content": "Say"}], max_tokens=1, temperature=2.0, seed=122,
               extra_body={"drafter": "none"})
    reply = client.chat.completions.create(**ask)
    assert reply.usage.completion_tokens == 1
    assert reply.choices[0].message.content == ""
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in client.chat.completions.create(**ask, stream=True)
                       if chunk.choices)
    assert streamed == ""


def test_a_client_that_half_closes_after_its_request_gets_its_answer(live):
    body = chat_body("a", "hi", max_tokens=3)
    with socket.create_connection(("127.0.0.1", live.port), timeout=30) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        sock.shutdown(socket.SHUT_WR)  # "nothing more from me", as `nc -N` does
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    while data.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"):  # interim responses that probe the socket
        data = data[len(b"HTTP/1.1 100 Continue\r\n\r\n"):]
    head, _, payload = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), data[:200]
    assert json.loads(payload)["usage"]["completion_tokens"] >= 1


def test_a_client_that_leaves_during_its_upload_logs_nothing(live):
    with socket.create_connection(("127.0.0.1", live.port)) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n" + b'{"model": "a"')
        time.sleep(0.3)
    time.sleep(0.5)
    assert live.get("/health")[0] == 200
    assert "Traceback" not in live.stderr() and "ClientDisconnect" not in live.stderr()


@pytest.mark.parametrize("how", ["option", "environment"])
def test_an_empty_api_key_is_refused_not_ignored(tiny_models, how):
    """`--api-key "$KEY"` with KEY unset ran the server without authentication."""
    args = ["--api-key", ""] if how == "option" else []
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SPECLLAMA_API_KEY", None)
    if how == "environment":
        env["SPECLLAMA_API_KEY"] = ""
    proc = subprocess.run([sys.executable, "-m", "specllama", "serve", "--target", str(tiny_models["a"]), "--port", "0",
                           *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == (2 if how == "option" else 1)  # a usage error, or a setting's
    assert "empty" in proc.stderr.strip().splitlines()[-1] and "Traceback" not in proc.stderr
