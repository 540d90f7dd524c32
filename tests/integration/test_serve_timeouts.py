"""Sockets that hold `specllama serve` without sending a request are closed: headers must arrive
within --header-timeout, body bytes may not pause longer than --body-timeout, and beyond
--max-connections open sockets a new one is answered 503 and closed (issue 33: sockets that never
finished their headers, or sent 9 of 1,000 announced bytes, stayed open indefinitely; 3,000 idle
ones were accepted). Raw sockets on 127.0.0.1 against a live server with short limits."""

from __future__ import annotations

import http.client
import socket
import time

import pytest

from tests.support.live_serve import LiveServer, chat_body

HEADER_TIMEOUT = 1.0
BODY_TIMEOUT = 1.0
MAX_CONNECTIONS = 6


@pytest.fixture(scope="module")
def live(tiny_models, tmp_path_factory):
    server = LiveServer(["--target", str(tiny_models["a"]), "--no-draft", "--header-timeout", str(HEADER_TIMEOUT),
                         "--body-timeout", str(BODY_TIMEOUT), "--max-connections", str(MAX_CONNECTIONS)],
                        tmp_path_factory.mktemp("serve") / "serve.log")
    yield server
    assert server.stop() == 0
    assert "Traceback" not in server.stderr()


def read_until_closed(sock: socket.socket, limit: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes, and when it closed (seconds from now)."""
    started = time.monotonic()
    sock.settimeout(limit)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data, time.monotonic() - started


def test_a_socket_that_never_finishes_its_headers_is_closed(live):
    with socket.create_connection(("127.0.0.1", live.port)) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        started = time.monotonic()
        for _ in range(20):  # a header byte every 0.2 s keeps a read timeout alive, not this one
            time.sleep(0.2)
            try:
                sock.sendall(b"X")
            except OSError:
                break
        data, _ = read_until_closed(sock, 10)
    assert time.monotonic() - started < HEADER_TIMEOUT + 2.5
    assert data.startswith(b"HTTP/1.1 408") and b"headers" in data


def test_a_socket_that_sends_nothing_is_closed(live):
    with socket.create_connection(("127.0.0.1", live.port)) as sock:
        data, took = read_until_closed(sock, 10)
    assert took < HEADER_TIMEOUT + 2 and data.startswith(b"HTTP/1.1 408")


def test_a_body_that_stops_arriving_is_closed(live):
    with socket.create_connection(("127.0.0.1", live.port)) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n" + b'{"model":')
        data, took = read_until_closed(sock, 10)
    assert took < BODY_TIMEOUT + 2
    assert data.startswith(b"HTTP/1.1 408") and b"body" in data
    assert live.get("/health")[0] == 200


def test_connections_past_the_cap_are_refused_and_the_cap_frees_up(live):
    idle = [socket.create_connection(("127.0.0.1", live.port)) for _ in range(MAX_CONNECTIONS)]
    try:
        time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", live.port)) as extra:
            data, took = read_until_closed(extra, 5)
        assert data.startswith(b"HTTP/1.1 503") and took < 2
    finally:
        for sock in idle:
            sock.close()
    time.sleep(0.3)
    assert live.get("/health")[0] == 200


def test_ordinary_clients_are_not_cut(live):
    """A kept-alive connection that waits longer than the header timeout between requests is
    closed only by the keep-alive timeout (5 s), not while a request is on its way; a body sent
    in slow pieces, each pause shorter than the body timeout, is read whole."""
    conn = http.client.HTTPConnection("127.0.0.1", live.port, timeout=30)
    for _ in range(2):
        conn.request("POST", "/v1/chat/completions", chat_body("a", "hi", max_tokens=2),
                     {"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 200 and response.read()
        time.sleep(HEADER_TIMEOUT + 0.5)
    conn.close()
    body = chat_body("a", "hello there", max_tokens=2)
    with socket.create_connection(("127.0.0.1", live.port)) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode())
        for i in range(0, len(body), 20):
            sock.sendall(body[i:i + 20])
            time.sleep(BODY_TIMEOUT / 3)
        data, _ = read_until_closed(sock, 30)
    assert data.startswith(b"HTTP/1.1 200"), data[:200]
