"""`specllama batch --server` against fake OpenAI-compatible servers on 127.0.0.1 (no model loads):
records, rotation around failing servers, retries, malformed answers, interruption and resume."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specllama.cli.main import main
from tests.support.fake_openai_server import FakeServer, echo_reply

REPO = Path(__file__).resolve().parents[2]
FAST = ["--backoff", "0.01", "--timeout", "10"]


def write_prompts(path: Path, n: int) -> tuple[Path, list[str]]:
    ids = [f"p{i:02d}" for i in range(n)]
    path.write_text("".join(json.dumps({"id": i, "prompt": f"prompt {i}"}) + "\n" for i in ids))
    return path, ids


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def dead_port_url() -> str:
    """An address where nothing listens: a port the kernel handed out and we released."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_a_batch_on_two_servers_writes_each_prompt_once_with_its_server(tmp_path, capsys, monkeypatch):
    prompts, ids = write_prompts(tmp_path / "p.jsonl", 20)
    out = tmp_path / "out.jsonl"
    monkeypatch.setenv("SPECLLAMA_API_KEY", "sk-test")
    with FakeServer(models=["qwen-target"], props={"total_slots": 3}) as a, FakeServer() as b:
        code = main(["batch", str(prompts), "-o", str(out), "--server", a.url, "--server", b.url + "/v1",
                     "--system", "be brief", "--max-tokens", "7", *FAST])
    assert code == 0, capsys.readouterr().err
    records = read_jsonl(out)
    assert sorted(r["id"] for r in records) == ids
    by_id = {r["id"]: r for r in records}
    assert by_id["p03"]["text"] == "echo: prompt p03"
    assert {r["server"] for r in records} <= {a.url, b.url + "/v1"}
    r = records[0]
    assert (r["tokens"], r["prompt_tokens"], r["tokens_per_s"], r["finish_reason"]) == (5, 7, 50.0, "stop")
    assert (r["drafted"], r["accepted"], r["acceptance"]) == (8, 6, 0.75)
    assert {"id", "prompt", "text", "tokens", "tokens_per_s", "acceptance", "mean_accepted", "finish_reason",
            "prompt_tokens", "seconds", "server"} <= r.keys()
    sent = a.chat_requests + b.chat_requests
    assert len(sent) == 20
    assert {req["model"] for req in a.chat_requests} <= {"qwen-target"}  # from /v1/models
    assert {req["model"] for req in b.chat_requests} <= {"default"}  # b lists none
    assert sent[0]["messages"][0] == {"role": "system", "content": "be brief"} and sent[0]["max_tokens"] == 7
    assert {h.get("Authorization") for h in a.headers_seen + b.headers_seen} == {"Bearer sk-test"}
    err = capsys.readouterr().err
    assert "acceptance 75.0%" in err
    assert "] p03: done on http://127.0.0.1:" in err and "(5 tokens, 50.0 tok/s)" in err  # a line per prompt

    # Rerun: everything is there, nothing is sent.
    with FakeServer() as c:
        assert main(["batch", str(prompts), "-o", str(out), "--server", c.url, *FAST]) == 0
        assert c.chat_requests == []


def test_a_server_with_nothing_listening_leaves_all_the_work_to_the_other(tmp_path, capsys):
    prompts, ids = write_prompts(tmp_path / "p.jsonl", 12)
    out = tmp_path / "out.jsonl"
    dead = dead_port_url()
    with FakeServer() as live:
        code = main(["batch", str(prompts), "-o", str(out), "--server", dead, "--server", live.url,
                     "--concurrency", "2", *FAST])
    err = capsys.readouterr().err
    assert code == 0, err
    records = read_jsonl(out)
    assert sorted(r["id"] for r in records) == ids
    assert {r["server"] for r in records} == {live.url}
    assert f"{dead} is not answering yet" in err


def test_a_server_answering_500_is_taken_out_and_the_other_does_everything(tmp_path, capsys):
    prompts, ids = write_prompts(tmp_path / "p.jsonl", 12)
    out = tmp_path / "out.jsonl"
    with FakeServer(lambda body, n: (500, {}, b"boom")) as broken, FakeServer() as live:
        code = main(["batch", str(prompts), "-o", str(out), "--server", broken.url, "--server", live.url,
                     "--retries", "8", *FAST])
    err = capsys.readouterr().err
    assert code == 0, err
    assert sorted(r["id"] for r in read_jsonl(out)) == ids
    assert {r["server"] for r in read_jsonl(out)} == {live.url}
    assert f"{broken.url} out of rotation" in err and "HTTP 500: boom" in err


def test_429_with_retry_after_is_waited_out_then_the_prompt_succeeds(tmp_path, capsys):
    prompts, ids = write_prompts(tmp_path / "p.jsonl", 3)
    out = tmp_path / "out.jsonl"

    def busy_first(body, n):
        return (429, {"Retry-After": "0"}, b'{"error": "busy"}') if n == 0 else echo_reply(body)

    with FakeServer(busy_first) as server:
        code = main(["batch", str(prompts), "-o", str(out), "--server", server.url, *FAST])
    err = capsys.readouterr().err
    assert code == 0, err
    assert sorted(r["id"] for r in read_jsonl(out)) == ids
    assert len(server.chat_requests) == 4  # the refused prompt was sent again, once
    assert "HTTP 429" in err and f"{server.url} answers again, back in rotation" in err


def test_a_request_past_the_timeout_is_abandoned_and_sent_again(tmp_path, capsys):
    prompts, ids = write_prompts(tmp_path / "p.jsonl", 2)
    out = tmp_path / "out.jsonl"

    def stuck_first(body, n):
        if n == 0:
            time.sleep(2.0)  # longer than --timeout: the client must give up on it
        return echo_reply(body)

    with FakeServer(stuck_first) as server:
        code = main(["batch", str(prompts), "-o", str(out), "--server", server.url, "--backoff", "0.01",
                     "--timeout", "0.3"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "timed out" in err
    records = read_jsonl(out)
    assert sorted(r["id"] for r in records) == ids and len(records) == 2


@pytest.mark.parametrize("status,body,message", [
    (500, b"internal error", "HTTP 500: internal error"),
    (200, b"<html>not json</html>", "malformed response"),
    (200, b'{"id": "x", "object": "chat.completion"}', "malformed response"),
])
def test_a_prompt_that_fails_all_its_retries_is_reported_and_not_written(tmp_path, capsys, status, body, message):
    prompts, ids = write_prompts(tmp_path / "p.jsonl", 3)
    out = tmp_path / "out.jsonl"
    with FakeServer(lambda b, n: (status, {}, body)) as server:
        code = main(["batch", str(prompts), "-o", str(out), "--server", server.url, "--retries", "2", *FAST])
    err = capsys.readouterr().err
    assert code == 1
    assert read_jsonl(out) == []  # nothing half-written: the next run tries again
    assert f"prompt 'p00' (line 1) failed: {message}" in err
    # After one prompt used its whole schedule on the only server, the rest are not thrown at it.
    assert len(server.chat_requests) == 3
    assert "2 prompt(s) not done: no server answered" in err


def test_a_prompt_the_server_refuses_fails_at_once_and_the_others_are_written(tmp_path, capsys):
    prompts, ids = write_prompts(tmp_path / "p.jsonl", 4)
    out = tmp_path / "out.jsonl"

    def refuse_p02(body, n):
        if "p02" in body["messages"][-1]["content"]:
            return 400, {}, b'{"error": "the prompt does not fit in the context"}'
        return echo_reply(body)

    with FakeServer(refuse_p02) as server:
        code = main(["batch", str(prompts), "-o", str(out), "--server", server.url, *FAST])
    err = capsys.readouterr().err
    assert code == 1
    assert sorted(r["id"] for r in read_jsonl(out)) == ["p00", "p01", "p03"]
    assert "prompt 'p02' (line 3) failed: HTTP 400" in err
    assert len(server.chat_requests) == 4  # not retried: the same prompt would be refused again


def test_server_options_are_checked_before_anything_is_sent(tmp_path, capsys):
    prompts, _ = write_prompts(tmp_path / "p.jsonl", 1)
    servers = tmp_path / "servers.txt"
    servers.write_text("# the fleet\n\n")
    assert main(["batch", str(prompts), "-o", str(tmp_path / "o.jsonl"), "--servers-file", str(servers)]) == 1
    assert main(["batch", str(prompts), "-o", str(tmp_path / "o.jsonl"), "--server", "ftp://x"]) == 2
    assert main(["batch", str(prompts), "-o", str(tmp_path / "o.jsonl"), "--server", "http://127.0.0.1:9",
                 "--target", "x.gguf"]) == 2
    err = capsys.readouterr().err
    assert "lists no server" in err and "expected an address" in err and "--target" in err
    assert "Traceback" not in err and not (tmp_path / "o.jsonl").exists()


def test_servers_file_lists_one_url_a_line_with_comments(tmp_path, capsys):
    prompts, ids = write_prompts(tmp_path / "p.jsonl", 4)
    out = tmp_path / "out.jsonl"
    with FakeServer() as a, FakeServer() as b:
        servers = tmp_path / "servers.txt"
        servers.write_text(f"# fleet\n{a.url}  # first\n\n{b.url}\n")
        assert main(["batch", str(prompts), "-o", str(out), "--servers-file", str(servers), *FAST]) == 0
        assert len(a.chat_requests) + len(b.chat_requests) == 4


def _slow_echo(body, n):
    time.sleep(0.05)  # slow enough that the batch can be stopped half-way
    return echo_reply(body)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_stopped_batch_keeps_a_valid_file_and_the_rerun_finishes_each_id_once(tmp_path, sig):
    prompts, ids = write_prompts(tmp_path / "p.jsonl", 60)
    out = tmp_path / "out.jsonl"
    with FakeServer(_slow_echo) as server:
        cmd = [sys.executable, "-m", "specllama", "batch", str(prompts), "-o", str(out), "--server", server.url,
               "--concurrency", "2", *FAST]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if out.exists() and out.read_bytes().count(b"\n") >= 5:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "finished before it could be stopped: " + proc.stderr.read().decode()
        proc.send_signal(sig)
        proc.wait(timeout=30)
        stderr = proc.stderr.read().decode()
        if sig == signal.SIGKILL:
            assert proc.returncode == -signal.SIGKILL
        else:
            assert proc.returncode == 130, stderr
            assert "rerun the same command" in stderr and "Traceback" not in stderr
            records = read_jsonl(out)  # every line whole JSON
            assert 5 <= len(records) < len(ids) and len({r["id"] for r in records}) == len(records)
        before = len(out.read_bytes().splitlines())

        rerun = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert rerun.returncode == 0, rerun.stderr
    records = read_jsonl(out)
    assert sorted(r["id"] for r in records) == ids  # every id exactly once
    assert f"{before} already done" in rerun.stderr or "incomplete last line" in rerun.stderr
