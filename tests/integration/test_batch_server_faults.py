"""`batch --server` against a misbehaving server: replies nested too deep, endless or trickling,
workers that raise, odd statistics, and options checked before anything is sent."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from specllama.cli.main import main
from tests.support.fake_openai_server import FakeServer, echo_reply
from tests.support.one_line import one_error_line


def server_batch(tmp_path, url: str, *extra: str, prompts: str = "one\ntwo\n") -> tuple[int, Path]:
    path = tmp_path / "p.txt"
    path.write_text(prompts)
    out = tmp_path / "out.jsonl"
    return main(["batch", str(path), "-o", str(out), "--server", url, "--retries", "0", *extra]), out


def run_with_deadline(fn, seconds: float):
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("value", fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s"
    return result["value"]


def test_a_reply_nested_too_deep_is_a_malformed_reply_not_a_dead_worker(tmp_path, capsys):
    def deep_first(body, n):
        if n == 0:
            return 200, {}, b'{"choices": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}"
        return echo_reply(body, n)

    with FakeServer(deep_first) as server:
        code, out = run_with_deadline(lambda: server_batch(tmp_path, server.url, "--concurrency", "1", "--retries",
                                                           "1", "--backoff", "0.01"), 60)
    assert code == 0  # the reply nested 100k deep was a malformed reply, retried; then answered
    assert sorted(json.loads(line)["id"] for line in out.read_text().splitlines()) == [1, 2]
    err = capsys.readouterr().err
    assert "malformed response" in err and "Traceback" not in err


def test_a_worker_that_raises_something_unforeseen_does_not_hang_the_batch(tmp_path, monkeypatch, capsys):
    from specllama.batch import server_client

    real = server_client.parse_chat_reply

    def explode_once(status, headers, data, seconds):
        if b"echo: one" in data:
            raise OverflowError("something nobody foresaw")
        return real(status, headers, data, seconds)

    monkeypatch.setattr(server_client, "parse_chat_reply", explode_once)
    with FakeServer() as server:
        code, out = run_with_deadline(lambda: server_batch(tmp_path, server.url, "--concurrency", "1"), 60)
    assert code == 1
    err = capsys.readouterr().err
    assert "unexpected error: OverflowError" in err and "Traceback" not in err
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == [2]


class TricklingServer:
    """Answers every request one byte at a time, a byte every `pause` seconds (a slow loris)."""

    def __init__(self, pause: float = 0.2, endless: bool = False):
        import socket

        self.pause, self.endless = pause, endless
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        try:
            conn.recv(65536)
            if self.endless:  # a chunked body that never ends, fast
                conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                chunk = b"x" * 65536
                while not self.stop.is_set():
                    conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            else:
                for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 100:
                    if self.stop.is_set():
                        break
                    conn.sendall(bytes([byte]))
                    time.sleep(self.pause)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.stop.set()
        self.sock.close()


def test_the_timeout_bounds_a_whole_request_not_one_read():
    from specllama.batch.server_client import ServerClient, ServerError

    server = TricklingServer(pause=0.2)
    try:
        client = ServerClient(server.url, timeout=1.0)
        started = time.monotonic()
        with pytest.raises(ServerError, match="timed out"):
            client.chat({"messages": []})
        assert time.monotonic() - started < 5  # a byte every 0.2 s would take 30 s
    finally:
        server.close()


def test_an_endless_reply_is_cut_at_the_size_cap(monkeypatch):
    from specllama.batch import server_client
    from specllama.batch.server_client import ServerClient, ServerError

    monkeypatch.setattr(server_client, "MAX_REPLY_BYTES", 1 << 20)
    server = TricklingServer(endless=True)
    try:
        with pytest.raises(ServerError, match="exceeds 1 MiB"):
            ServerClient(server.url, timeout=30).chat({"messages": []})
    finally:
        server.close()


def test_a_servers_slot_count_is_capped():
    from specllama.batch.server_client import MAX_SLOTS, ServerClient, discover

    with FakeServer(props={"total_slots": 100_000}, models=["m"]) as server:
        assert discover(ServerClient(server.url, timeout=5)) == ("m", MAX_SLOTS)


def test_a_reply_with_lone_surrogates_or_nan_stats_is_written_as_json(tmp_path):
    def hostile(body, n):
        reply = ('{"choices": [{"message": {"content": "bad \\ud800 text"}, "finish_reason": "stop"}], '
                 '"usage": {"completion_tokens": -3}, '
                 '"timings": {"predicted_per_second": NaN, "draft_n": -1, "draft_n_accepted": 5}}')
        return 200, {}, reply.encode()

    with FakeServer(hostile) as server:
        code, out = server_batch(tmp_path, server.url, prompts="one\n")
    assert code == 0
    line = out.read_text().splitlines()[0]
    rec = json.loads(line, parse_constant=lambda c: pytest.fail(f"bare {c} in the output"))
    assert rec["text"] == "bad \ufffd text" and rec["drafted"] is None and rec["tokens"] >= 0


@pytest.mark.parametrize("option, fragment", [
    (["--temp", "nan"], "temperature"), (["--top-p", "2"], "top_p"), (["--min-p", "5"], "min_p"),
    (["--top-k", "-5"], "top_k"), (["--timeout", "nan"], "--timeout"), (["--timeout", "inf"], "--timeout"),
    (["--backoff", "nan"], "--backoff"),
])
def test_server_batch_options_are_checked_before_sending(tmp_path, capsys, option, fragment):
    with FakeServer() as server:
        code, out = server_batch(tmp_path, server.url, *option)
        assert code == 2 and server.chat_requests == []
    one_error_line(capsys.readouterr().err, fragment)


@pytest.mark.parametrize("url", ["http://[::1", "http://host name:8080"])
def test_a_malformed_server_address_is_one_error(tmp_path, capsys, url):
    code, _ = server_batch(tmp_path, url)
    assert code == 2
    one_error_line(capsys.readouterr().err, "--server")


def test_an_api_key_with_a_line_break_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPECLLAMA_API_KEY", "secret\r\nX-Evil: 1")
    with FakeServer() as server:
        code, _ = server_batch(tmp_path, server.url)
        assert code == 1 and server.chat_requests == []
    one_error_line(capsys.readouterr().err, "API key")


def test_a_servers_file_that_is_not_utf8_is_one_error(tmp_path, capsys):
    servers = tmp_path / "servers.txt"
    servers.write_bytes(b"http://127.0.0.1:1 # caf\xff\n")
    prompts = tmp_path / "p.txt"
    prompts.write_text("one\n")
    assert main(["batch", str(prompts), "-o", str(tmp_path / "o.jsonl"), "--servers-file", str(servers)]) == 1
    one_error_line(capsys.readouterr().err, "not UTF-8")
