"""`specllama batch --server` with a missing or wrong API key says the server refused the key, at
once, instead of retrying 401 as a passing failure for minutes and ending with "no server
answered ... rerun" (issue 33, item 8). A live `specllama serve --api-key` on 127.0.0.1; a second
server that takes the key still does every prompt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.support.live_serve import REPO, LiveServer

KEY = "sk-right"


def batch(tmp_path, urls: list[str], key: str | None) -> tuple[subprocess.CompletedProcess, float]:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("one\ntwo\nthree\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SPECLLAMA_API_KEY", None)
    env.pop("OPENAI_API_KEY", None)
    if key is not None:
        env["SPECLLAMA_API_KEY"] = key
    servers = [arg for url in urls for arg in ("--server", url)]
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "specllama", "batch", str(prompts), "-o", str(tmp_path / "out.jsonl"),
                           *servers, "--max-tokens", "4", "--retries", "3"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    return proc, time.monotonic() - started


@pytest.fixture(scope="module")
def keyed(tiny_models, tmp_path_factory):
    server = LiveServer(["--target", str(tiny_models["a"]), "--no-draft"], tmp_path_factory.mktemp("keyed") / "serve.log",
                        api_key=KEY)
    yield server
    assert server.stop() == 0


@pytest.mark.parametrize("key", [None, "sk-wrong"])
def test_a_refused_key_ends_the_batch_at_once_and_says_so(keyed, tmp_path, key):
    proc, took = batch(tmp_path, [keyed.url], key)
    assert proc.returncode == 1
    assert "refused the API key" in proc.stderr and "no server answered" not in proc.stderr, proc.stderr[-2000:]
    assert "3 prompt(s) not done" in proc.stderr
    assert took < 30  # retrying with backoff (1 + 2 + 4 + 8 s at least) is what this replaced
    assert "Traceback" not in proc.stderr


def test_a_server_that_refuses_the_key_leaves_the_others_to_do_the_work(keyed, tiny_models, tmp_path):
    open_server = LiveServer(["--target", str(tiny_models["a"]), "--no-draft"], tmp_path / "open.log", api_key="sk-other")
    try:
        proc, _ = batch(tmp_path, [keyed.url, open_server.url], "sk-other")
    finally:
        assert open_server.stop() == 0
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"{keyed.url} refused the API key" in proc.stderr
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(records) == 3 and {r["server"] for r in records} == {open_server.url}
