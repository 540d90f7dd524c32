"""A real `specllama serve` decodes on its engine thread only, its start-up warm-up on a thread that ends
with it (llama/decode_threads.py): a second long-lived thread that decodes leaves libgomp with more
workers than cores, and every barrier of every later decode then sleeps instead of spinning (measured
while its warm-up ran on the main thread: serve's threads at 1.83 cores against llama-server's 1.98,
bench/measured/xeon-20261127-serve-thread-cores).

The subprocess writes each decoding thread's name through decode_thread_hooks/sitecustomize.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.support.live_serve import REPO, LiveServer

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                             "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                            "required": ["city"]}}}


def test_serve_decodes_on_its_engine_thread_and_warms_up_on_a_passing_one(tiny_models, tmp_path):
    log = tmp_path / "decode-threads.log"
    hooks = str(Path(__file__).resolve().parents[1] / "support" / "decode_thread_hooks")
    live = LiveServer(["--target", str(tiny_models["a"]), "--draft", str(tiny_models["b"]), "--ctx", "512",
                       "--parallel", "2", "--max-tokens", "12", "--temp", "0"], tmp_path / "serve.log",
                      env={"PYTHONPATH": os.pathsep.join([hooks, str(REPO)]), "SPECLLAMA_DECODE_THREADS_LOG": str(log)})
    try:
        for extra in ({"drafter": "model"}, {"drafter": "suffix"}, {"drafter": "none"},
                      {"tools": [WEATHER], "tool_choice": "required"}):
            body = {"model": "a", "messages": [{"role": "user", "content": "Weather in Paris?"}], "max_tokens": 12, **extra}
            status, _, raw = live.request("POST", "/v1/chat/completions", json.dumps(body).encode())
            assert status == 200, raw
    finally:
        assert live.stop() == 0, live.stderr()[-3000:]
    threads = log.read_text().splitlines()
    assert threads == ["specllama-warm-up", "specllama-engine"], threads
