"""The server batch's own cost per request: `specllama batch --server` against the tests' fake
server, whose answers are instant, so requests/s is the client's ceiling (HTTP, JSON, the queue,
one fsynced line per prompt) and not a model's speed.

    python scripts/measure/server_client.py [N_PROMPTS]
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specllama.cli.main import main  # noqa: E402
from tests.support.fake_openai_server import FakeServer  # noqa: E402


def measure(n: int, concurrency: int) -> float:
    with tempfile.TemporaryDirectory() as tmp, FakeServer() as server:
        prompts = Path(tmp) / "p.jsonl"
        prompts.write_text("".join(json.dumps({"id": i, "prompt": f"prompt {i}"}) + "\n" for i in range(n)))
        start = time.perf_counter()
        with contextlib.redirect_stderr(io.StringIO()):
            code = main(["batch", str(prompts), "-o", str(Path(tmp) / "out.jsonl"), "--server", server.url,
                         "--concurrency", str(concurrency)])
        seconds = time.perf_counter() - start
        assert code == 0 and len(server.chat_requests) == n
    return n / seconds


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    for concurrency in (1, 4):
        print(f"--concurrency {concurrency}: {measure(n, concurrency):.0f} requests/s ({n} trivial answers)")
