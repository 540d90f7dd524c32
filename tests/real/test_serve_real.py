"""`specllama serve` with real models, in exact mode, where the claim is bit-identity:
  - the real pair's greedy answer through the server is `specllama run`'s text with the same settings;
  - 8 concurrent clients get the texts they get one at a time (SmolLM2: small, real, quantized),
    while the server really decodes several requests together.
Run under `flock /tmp/specllama-heavy.lock` on a shared machine."""

from __future__ import annotations

import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.live_serve import REPO, LiveServer

pytestmark = pytest.mark.real_models

PROMPT = "Write a Python function that returns the n-th Fibonacci number, iteratively."
QUESTIONS = ["What is a closure in Python?", "Name three sorting algorithms.", "Explain TCP in one sentence.",
             "Write a haiku about code.", "What does HTTP 404 mean?", "Give an example of a list comprehension.",
             "Why use version control?", "What is a prime number?"]


def test_the_real_pair_answers_through_the_server_as_run_does(real_model_paths, tmp_path):
    settings = ["--target", str(real_model_paths["qwen1.5b"]), "--draft", str(real_model_paths["qwen0.5b"]),
                "--drafter", "model", "-k", "3", "--exact", "--ctx", "1024", "--threads", "2"]
    run = subprocess.run([sys.executable, "-m", "specllama", "run", PROMPT, "--max-tokens", "48", *settings],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    live = LiveServer([*settings, "--parallel", "1"], tmp_path / "serve.log")
    try:
        models = live.client().models.list()
        reply = live.client().chat.completions.create(model=models.data[0].id, max_tokens=48,
                                                      messages=[{"role": "user", "content": PROMPT}])
    finally:
        assert live.stop() == 0
    assert reply.choices[0].message.content == run.stdout[:-1]  # run ends its output with a newline
    assert reply.model_extra["speculation"]["drafted_by"]["model"] > 0


def test_eight_concurrent_clients_get_the_texts_they_get_one_at_a_time(real_model_paths, tmp_path):
    live = LiveServer(["--target", str(real_model_paths["smollm2"]), "--no-draft", "--exact", "--ctx", "512",
                       "--parallel", "4", "--threads", "2"], tmp_path / "serve.log")
    client = live.client()

    def ask(question: str) -> str:
        reply = client.chat.completions.create(model="smollm2-135m-instruct-q4_1", max_tokens=40,
                                               messages=[{"role": "user", "content": question}])
        return reply.choices[0].message.content

    busiest = [0]
    done = threading.Event()

    def watch():  # how many requests the server decoded together at its busiest
        while not done.is_set():
            busiest[0] = max(busiest[0], int(live.metrics()["specllama_requests_active"]))

    try:
        alone = [ask(q) for q in QUESTIONS]
        watcher = threading.Thread(target=watch)
        watcher.start()
        with ThreadPoolExecutor(8) as pool:
            together = list(pool.map(ask, QUESTIONS))
        done.set()
        watcher.join()
    finally:
        done.set()
        assert live.stop() == 0
    assert together == alone
    assert len(set(alone)) == len(alone) and all(alone)
    assert busiest[0] >= 2, "the concurrent requests were never decoded together"
