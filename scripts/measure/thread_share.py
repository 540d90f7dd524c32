#!/usr/bin/env python3
"""A server that starts on an idle machine, then shares it: tokens/s before, during and after
another process keeps a core busy, with threads that follow the machine (`--thread-wait auto`,
llama/thread_share.py) and with the fixed choice auto made at the start (`--thread-wait spin`).

Each arm is a fresh `specllama serve --drafter none` on the default target, started while the
machine is idle; per phase, a few greedy requests of the same held-out prompts (not from any
tuning set), one at a time; the busy process (a Python loop, nice 0) starts after the idle phase,
runs SETTLE_S before the busy phase's first request, and ends before the last phase. Arms
alternate by round. Figures: completion tokens / request wall time (the short prompt included).

    .venv/bin/python scripts/measure/thread_share.py --rounds 2 --out bench/measured/vm-20261125-thread-share
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from specllama.llama.machine import cpu_model  # noqa: E402

PROMPTS = [
    "Explain what a Python context manager is and write a small one that times a block of code.",
    "Write a bash script that finds the ten largest files under a directory and prints their sizes.",
]
PHASES = ("idle", "busy", "idle again")
SETTLE_S = 4.0  # PERIOD_S x CONFIRM of thread_share, with room: the cap has moved by then
OPENMP_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "SPECLLAMA_THREAD_WAIT", "SPECLLAMA_THREAD_WAIT_APPLIED")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port: int, prompt: str, max_tokens: int) -> tuple[int, float]:
    body = json.dumps({"model": "x", "max_tokens": max_tokens, "temperature": 0,
                       "messages": [{"role": "user", "content": prompt}]}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body, {"content-type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        done = json.load(r)
    return done["usage"]["completion_tokens"], time.perf_counter() - t


def one_arm(arm: str, threads: int, max_tokens: int, log: Path) -> dict:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in OPENMP_VARS}
    server = subprocess.Popen([sys.executable, "-m", "specllama", "serve", "--port", str(port), "--drafter", "none",
                               "-t", str(threads), "--thread-wait", arm, "-v"], cwd=REPO, env=env,
                              stdout=subprocess.DEVNULL, stderr=log.open("a"), text=True)
    busy = None
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        post(port, "Say hi.", 4)  # warm-up: first decodes allocate
        out = {}
        for phase in PHASES:
            if phase == "busy":
                busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
                time.sleep(SETTLE_S)
            elif busy is not None:
                busy.kill()
                busy.wait()
                busy = None
                time.sleep(SETTLE_S)
            rates = []
            for prompt in PROMPTS:
                tokens, seconds = post(port, prompt, max_tokens)
                rates.append(tokens / seconds)
            out[phase] = rates
            print(f"  {arm:5s} {phase:10s} " + " ".join(f"{r:.1f}" for r in rates) + " tok/s", flush=True)
        return out
    finally:
        if busy is not None:
            busy.kill()
        server.terminate()
        server.wait(timeout=30)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", metavar="PATH", help="write PATH.json and PATH.md")
    args = p.parse_args()
    arms = ("auto", "spin")
    runs = []
    for r in range(args.rounds):
        for arm in (arms if r % 2 == 0 else arms[::-1]):
            log = Path(f"/tmp/measure_thread_share-{os.getpid()}-{r}-{arm}.log")
            phases = one_arm(arm, args.threads, args.max_tokens, log)
            said = [ln.strip() for ln in log.read_text().splitlines() if "thread" in ln and "POST" not in ln]
            runs.append({"round": r, "arm": arm, "phases": phases, "threads_said": said})
            print("   " + "\n   ".join(said), flush=True)
    med = {arm: {ph: statistics.median(x for run in runs if run["arm"] == arm for x in run["phases"][ph]) for ph in PHASES}
           for arm in arms}
    machine = f"{cpu_model()}, {os.cpu_count()} cores, {platform.system()}"
    lines = [f"# A server sharing the machine after it started ({time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC)", "",
             f"Command: `.venv/bin/python scripts/measure/thread_share.py --rounds {args.rounds} --max-tokens {args.max_tokens}`. "
             f"Machine: {machine}; -t {args.threads}; `specllama serve --drafter none`, default target; greedy, "
             f"{len(PROMPTS)} held-out prompts a phase, {args.max_tokens} tokens; every server started on an idle machine; "
             f"busy: one Python loop at nice 0, started {SETTLE_S:.0f} s before the busy phase; arms alternate by round; "
             "medians of completion tokens / request wall time.", "",
             "| --thread-wait | " + " | ".join(PHASES) + " |", "|---|" + "---|" * len(PHASES)]
    for arm in arms:
        lines.append(f"| {arm} | " + " | ".join(f"{med[arm][ph]:.1f} tok/s" for ph in PHASES) + " |")
    lines += ["", "auto / spin: " + ", ".join(f"{ph} {med['auto'][ph] / med['spin'][ph]:.2f}x" for ph in PHASES), "",
              "What each server said of its threads (-v):", ""]
    lines += [f"- round {run['round']} {run['arm']}: " + " / ".join(run["threads_said"]) for run in runs]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out + ".json").write_text(json.dumps({"machine": machine, "threads": args.threads, "runs": runs,
                                                         "medians": med}, indent=1))
        Path(args.out + ".md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
