#!/usr/bin/env python3
"""Plain decoding speed under each way llama.cpp's threads can wait, beside llama.cpp's own server.

Arms, each a fresh process per run, interleaved (the order turns every round) on the same target
file, threads and prompts, greedy, `--no-draft`:

  sleep        OMP_WAIT_POLICY=PASSIVE: a waiting thread sleeps at once (what every command did)
  spin:N       GOMP_SPINCOUNT=N: spin N times (a PAUSE each, ~60 ns on this CPU) before sleeping;
               libgomp's own default, what llama.cpp's tools get, is spin:300000
  active       OMP_WAIT_POLICY=ACTIVE: spin forever
  llama-server llama.cpp's server from the same vendored sources (--llama-server PATH), one fresh
               server per run, /v1/chat/completions, its own timings.predicted_per_second

--busy N adds N busy processes (a Python loop each, nice 0) for the whole run: a machine where
something else wants the cores too, which is where spinning threads can lose badly.

The figure is generation tokens/s (prompt excluded): `run --stats`'s and llama-server's timings.

  flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/thread_wait.py --rounds 3 \
      --llama-server PATH --out bench/measured/vm-20261125-thread-wait
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from specllama.llama.machine import cpu_model  # noqa: E402
from specllama.models import store  # noqa: E402
from specllama.models.registry import load_registry  # noqa: E402

# Not from the repository's prompt sets (held out from every tuning run).
PROMPTS = [
    "Explain what a Python context manager is and write a small one that times a block of code.",
    "Write a bash script that finds the ten largest files under a directory and prints their sizes.",
    "Describe three differences between TCP and UDP, with one use case for each.",
]
OPENMP_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "SPECLLAMA_THREAD_WAIT", "SPECLLAMA_THREAD_WAIT_APPLIED")


def arm_env(arm: str) -> dict:
    """The OpenMP variables of an arm, given as a user's own (specllama keeps them as they are)."""
    if arm == "sleep":
        return {"OMP_WAIT_POLICY": "PASSIVE"}
    if arm == "active":
        return {"OMP_WAIT_POLICY": "ACTIVE"}
    if arm == "default":  # none given: specllama's own choice (SPECLLAMA_THREAD_WAIT's default, auto)
        return {}
    if arm.startswith("spin:"):
        return {"GOMP_SPINCOUNT": str(int(arm[5:]))}
    raise SystemExit(f"unknown arm {arm!r}")


def switches() -> int:
    """Voluntary context switches of every finished child so far. A run's share (the difference around
    it) tells spinning barriers from sleeping ones: ~500 a plain answer on 2 cores against ~60,000 where
    OpenMP's barriers slept (llama/decode_threads.py), and libgomp throttles its spin as soon as its
    workers outnumber the cores, which on 16 threads and 16 cores one extra thread would do."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_nvcsw


def clean_env(changes: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in OPENMP_VARS}
    # REPO first, the caller's path kept (a machine whose llama_cpp lives on PYTHONPATH, as on the device)
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return {**env, "PYTHONPATH": path, **changes}


def specllama_run(target: Path, prompt: str, args, env_changes: dict) -> tuple[float, list[str]]:
    """(generation tok/s, what the run said of its threads: how they wait and each time they followed
    other processes). Why the second: one round on the lent 16 cores gave 1.053x of llama-server at
    one sitting and 0.901x at another, with nothing to tell whether `auto` spun or the thread cap moved."""
    cmd = [sys.executable, "-m", "specllama", "run", "-m", str(target), "--no-draft", "-n", str(args.max_tokens),
           "-t", str(args.threads), "--stats", "-v", prompt]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=clean_env(env_changes),
                          stdin=subprocess.DEVNULL)
    match = re.search(r"tokens in [\d.]+ s · ([\d.]+) tok/s", done.stderr)
    if done.returncode != 0 or not match:
        raise SystemExit(f"`{' '.join(cmd)}` failed:\n{done.stderr[-2000:]}")
    threads = [line.removeprefix("specllama: ") for line in done.stderr.splitlines()
               if line.startswith(("specllama: threads between ops", "specllama: decoding with"))]
    return float(match.group(1)), threads


def llama_server_run(server: str, target: Path, prompt: str, args, port: int) -> float:
    cmd = [server, "-m", str(target), "-t", str(args.threads), "-c", "4096", "--host", "127.0.0.1",
           "--port", str(port), "-np", "1", "--no-webui"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=clean_env({}))
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        body = json.dumps({"messages": [{"role": "user", "content": prompt}], "max_tokens": args.max_tokens,
                           "temperature": 0, "ignore_eos": True}).encode()
        req = urllib.request.Request(url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            answer = json.loads(r.read())
        return float(answer["timings"]["predicted_per_second"])
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--arms", default="sleep,spin:1000,spin:30000,spin:300000",
                   help="comma-separated: sleep, spin:N, active, default (default: %(default)s)")
    p.add_argument("--target", metavar="GGUF", help="the target file (default: the default pair's target)")
    p.add_argument("--note", default="", help="a line for the report: the device, e.g. 'H100, all layers on the GPU'")
    p.add_argument("--busy", type=int, default=0, metavar="N", help="N busy processes beside the runs")
    p.add_argument("--llama-server", metavar="PATH", help="also llama.cpp's llama-server (same sources)")
    p.add_argument("--out", metavar="PATH", help="write PATH.json and PATH.md")
    args = p.parse_args()
    target = Path(args.target) if args.target else store.ensure(load_registry().model("qwen2.5-coder-1.5b"))
    arms = args.arms.split(",") + (["llama-server"] if args.llama_server else [])
    runs: dict[str, list[float]] = {arm: [] for arm in arms}
    threads: dict[str, list[list[str]]] = {arm: [] for arm in arms if arm != "llama-server"}
    switched: dict[str, list[int]] = {}  # arm -> each run's voluntary context switches (loading included)
    port = 18000 + os.getpid() % 1000
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        measure(args, target, arms, runs, threads, switched, port)
    finally:
        for proc in busy:
            proc.kill()
    report(args, target, runs, threads, switched)


def measure(args, target: Path, arms: list[str], runs: dict, threads: dict, switched: dict, port: int) -> None:
    for r in range(args.rounds):
        for i, prompt in enumerate(PROMPTS):
            order = arms if (r + i) % 2 == 0 else arms[::-1]
            for arm in order:
                before = switches()
                if arm == "llama-server":
                    tps = llama_server_run(args.llama_server, target, prompt, args, port)
                else:
                    tps, said = specllama_run(target, prompt, args, arm_env(arm))
                    threads[arm].append(said)
                runs[arm].append(tps)
                switched.setdefault(arm, []).append(switches() - before)
                print(f"round {r + 1} prompt {i + 1} {arm:12s} {tps:6.2f} tok/s, {switched[arm][-1]} voluntary switches",
                      file=sys.stderr, flush=True)


def report(args, target: Path, runs: dict, threads: dict, switched: dict) -> None:
    base = statistics.median(runs["llama-server"]) if "llama-server" in runs else None
    lines = [f"# Plain decoding by thread wait level ({time.strftime('%Y-%m-%d %H:%M')})", "",
             f"{cpu_model()}, {os.cpu_count()} cores, -t {args.threads}; target {target.name}; greedy, "
             f"--no-draft, -n {args.max_tokens}; {args.rounds} rounds x {len(PROMPTS)} held-out prompts, interleaved; "
             f"{args.busy} busy process(es) beside." + (f" {args.note}" if args.note else ""),
             "", "| arm | median tok/s | min | max | vs llama-server | voluntary switches a run (median; loading included) |",
             "|---|---|---|---|---|---|"]
    for arm, values in runs.items():
        med = statistics.median(values)
        ratio = f"{med / base:.3f}x" if base else "-"
        lines.append(f"| {arm} | {med:.2f} | {min(values):.2f} | {max(values):.2f} | {ratio} | "
                     f"{statistics.median(switched[arm]):.0f} |")
    for arm, said in threads.items():  # each distinct thing a run of the arm said of its threads, with how many runs said it
        seen = Counter(line for run in said for line in set(run))
        # "in N of M runs": a bare "(9x)" after the choice line read like nine changes of the thread cap
        lines.append(f"\n{arm}'s threads: " + ("; ".join(f"{line} (in {n} of {len(said)} runs)"
                                                           for line, n in seen.items()) or "-"))
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        Path(args.out + ".md").write_text(report)
        Path(args.out + ".json").write_text(json.dumps({"runs": runs, "threads": args.threads, "target": target.name,
                                                        "max_tokens": args.max_tokens, "prompts": PROMPTS, "busy": args.busy,
                                                        "note": args.note, "threads_said": threads,
                                                        "voluntary_switches": switched,
                                                        "cpu": cpu_model()}, indent=1))


if __name__ == "__main__":
    main()
