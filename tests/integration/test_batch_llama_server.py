"""`specllama batch --server` against a real server: llama-cpp-python's own OpenAI-compatible server
on 127.0.0.1 with the tiny model, killed mid-batch and restarted on the same port. Each start loads
a model: run under the shared model lock (see the project notes), and keep this file small. The
server needs the `server` extra (part of `dev`); without it the server's log says what is missing."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: Path, port: int, log: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "512", "--chat_format", "chatml", "--n_threads", "1"]
    proc = subprocess.Popen(cmd, stdout=log.open("ab"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"server exited: {log.read_text()[-2000:]}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"server did not answer within 120 s: {log.read_text()[-2000:]}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


def test_a_server_killed_mid_batch_and_restarted_loses_and_repeats_nothing(tmp_path, tiny_models):
    ids = [f"q{i:02d}" for i in range(40)]
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": i, "prompt": f"Tell me fact number {i}."}) + "\n" for i in ids))
    out = tmp_path / "out.jsonl"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    nobody = f"http://127.0.0.1:{free_port()}"  # a second server that never answers
    log = tmp_path / "server.log"
    server = start_server(tiny_models["a"], port, log)
    batch = None
    try:
        cmd = [sys.executable, "-m", "specllama", "batch", str(prompts), "-o", str(out), "--server", url,
               "--server", nobody, "--max-tokens", "24", "--retries", "12", "--backoff", "0.2", "--timeout", "60"]
        batch = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env={**os.environ, "PYTHONPATH": str(REPO)})
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and batch.poll() is None:
            if out.exists() and out.read_bytes().count(b"\n") >= 3:
                break
            time.sleep(0.01)
        assert batch.poll() is None, "finished before the server could be killed: " + batch.stderr.read().decode()
        server.send_signal(signal.SIGKILL)  # mid-request, most likely: that prompt must be retried
        stop(server)
        done_while_down = out.read_bytes().count(b"\n")
        server = start_server(tiny_models["a"], port, log)
        _, stderr = batch.communicate(timeout=300)
        stderr = stderr.decode()
    finally:
        if batch is not None and batch.poll() is None:
            batch.kill()
        stop(server)

    assert batch.returncode == 0, stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["id"] for r in records) == ids  # nothing lost, nothing twice
    assert done_while_down < len(ids)
    assert f"{url} out of rotation" in stderr and f"{url} answers again" in stderr
    assert {r["server"] for r in records} == {url}
    for r in records:
        assert isinstance(r["text"], str) and r["tokens"] > 0 and r["prompt_tokens"] > 0 and r["tokens_per_s"] > 0
        assert r["finish_reason"] in ("stop", "length")
        assert r["drafted"] is None and r["acceptance"] is None  # this server reports no draft counts
