"""`specllama batch --server` against `specllama serve` (the scale-out path closes on itself): two
serve instances behind one batch, discovered (model id, slots) and keyed through SPECLLAMA_API_KEY,
write the records a local batch writes with the same settings, speculation numbers per source included."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support.live_serve import REPO, LiveServer

KEY = "sk-batch-test"


def read_jsonl(path) -> dict:
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_batch_on_two_serve_instances_writes_what_a_local_batch_writes(tiny_models, tmp_path):
    ids = [f"p{i:02d}" for i in range(12)]
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": i, "prompt": f"Tell me fact number {i}."}) + "\n" for i in ids))
    settings = ["--drafter", "suffix", "-k", "3", "--max-tokens", "16"]
    model = ["--target", str(tiny_models["a"]), "--ctx", "512"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "SPECLLAMA_API_KEY": KEY}

    local = subprocess.run([sys.executable, "-m", "specllama", "batch", str(prompts), "-o", str(tmp_path / "local.jsonl"),
                            *model, *settings, "--parallel", "1"], cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=300)
    assert local.returncode == 0, local.stderr[-2000:]
    servers = [LiveServer([*model, *settings, "--parallel", "3"], tmp_path / f"serve{n}.log", env={"SPECLLAMA_API_KEY": KEY})
               for n in (1, 2)]
    for server in servers:
        server.api_key = KEY  # the key came from the environment; the test's own requests send it too
    try:
        remote = subprocess.run([sys.executable, "-m", "specllama", "batch", str(prompts), "-o",
                                 str(tmp_path / "remote.jsonl"), "--server", servers[0].url, "--server", servers[1].url,
                                 "--max-tokens", "16"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert remote.returncode == 0, remote.stderr[-2000:]
        counts = [s.metrics()['specllama_requests_total{outcome="length"}'] for s in servers]
    finally:
        for s in servers:
            assert s.stop() == 0
    assert sum(counts) == len(ids) and min(counts) >= 1  # both instances served
    here, there = read_jsonl(tmp_path / "local.jsonl"), read_jsonl(tmp_path / "remote.jsonl")
    assert sorted(here) == sorted(there) == ids
    for i in ids:
        assert there[i]["text"] == here[i]["text"] and there[i]["tokens"] == here[i]["tokens"]
        assert there[i]["prompt_tokens"] == here[i]["prompt_tokens"]
        assert set(there[i]["drafted_by"]) <= {"suffix"} and there[i]["mean_accepted"] >= 1.0
