"""How long a prompt's prefill goes on holding serve's one slot after its client has left.

A stream of a ~10k-token prompt (the repository's own source) is left after LEAVE seconds, mid-prefill,
by a client that has read everything sent so far (a clean end-of-file, as when an agent gives up and
retries); then a short request is sent at once. Printed: when the 499 line for the left request
appeared in the log, and how long the short request took to answer. Real pair's target, `-c 32768`,
`--parallel 1`, a fresh prompt-cache folder.

    flock /tmp/specllama-heavy.lock python scripts/measure/abandoned_prefill.py --leave 5
"""

from __future__ import annotations

import argparse
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import httpx

REPO = pathlib.Path(__file__).resolve().parents[2]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--leave", type=float, default=5.0, help="seconds into the long request's stream the client leaves")
    p.add_argument("--port", type=int, default=8791)
    args = p.parse_args()
    log_path = pathlib.Path(tempfile.mkdtemp()) / "serve.log"
    env = dict(os.environ, SPECLLAMA_PROMPT_CACHE=tempfile.mkdtemp())
    with log_path.open("w") as log:
        server = subprocess.Popen([sys.executable, "-m", "specllama", "serve", "--port", str(args.port), "-c", "32768",
                                   "--parallel", "1", "-v"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{args.port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(base + "/health", timeout=2)
                break
            except OSError:
                time.sleep(1)
        text = "".join(f.read_text() for f in sorted((REPO / "specllama").rglob("*.py")))[:40000]
        body = {"model": "x", "stream": True, "max_tokens": 20,
                "messages": [{"role": "user", "content": text + "\nSummarise."}]}
        t0 = time.time()
        with httpx.Client(timeout=600) as client:
            with client.stream("POST", base + "/v1/chat/completions", json=body) as r:
                for _ in r.iter_lines():  # a keep-alive every 10 s, then the check
                    if time.time() - t0 > args.leave:
                        break
        left = time.time()
        print(f"left after {left - t0:.1f} s", flush=True)

        def watch() -> None:
            while time.time() - left < 120:
                if " 499" in log_path.read_text():
                    print(f"499 logged {time.time() - left:.1f} s after leaving", flush=True)
                    return
                time.sleep(0.2)

        threading.Thread(target=watch, daemon=True).start()
        short = {"model": "x", "stream": True, "max_tokens": 5, "messages": [{"role": "user", "content": "Say hi."}]}
        with httpx.Client(timeout=600) as client:
            with client.stream("POST", base + "/v1/chat/completions", json=short) as r:
                for _ in r.iter_lines():
                    pass
        print(f"short request answered {time.time() - left:.1f} s after leaving", flush=True)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
