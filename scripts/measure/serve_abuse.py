"""Issue 33's goal for bounded work: with 40 abusive requests in flight (clients that give up after
10 s), /health answers within 1 s and a normal chat request completes in at most 2x its idle time.

Rounds alternate idle and abused (idle, abused, idle, abused, ...). In an abused round 40 clients
send an abusive body each and wait up to 10 s for the answer; 0.2 s later one normal greedy chat
is sent and timed, and /health is polled every 0.2 s until it is answered. Two ways to abuse:
  burst       each client sends once (the issue's scenario: 42 requests, given up after 10 s);
  continuous  each client sends again as soon as it has its answer, so 40 are in flight throughout.
The abusive bodies:
  s1      the S1 body of the issue: a chat whose content is 7.6 MB of `<|im_end|>x` (under the
          8 MiB --max-body); it used to be tokenized for minutes, now it is refused by its size;
  budget  a chat of plain words just under the size budget of the context (so it is tokenized,
          about a second of CPU each): the most work a body may cost now.

  flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/serve_abuse.py --out bench/measured/NAME
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from specllama.llama.machine import cpu_model  # noqa: E402
from specllama.models import store  # noqa: E402
from specllama.models.registry import load_registry  # noqa: E402

NORMAL = "Write a Python function that checks whether a number is prime."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port: int, method: str, path: str, body: bytes | None = None, timeout: float = 600) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body, {"Content-Type": "application/json"} if body else {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def chat(model: str, content: str, max_tokens: int) -> bytes:
    return json.dumps({"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
                       "temperature": 0}).encode()


def timed_chat(port: int, model: str, max_tokens: int) -> float:
    started = time.monotonic()
    status, data = request(port, "POST", "/v1/chat/completions", chat(model, NORMAL, max_tokens))
    if status != 200:
        raise SystemExit(f"the normal chat failed: {status} {data[:300]!r}")
    return time.monotonic() - started


def abused_round(port: int, model: str, body: bytes, clients: int, give_up: float, max_tokens: int,
                 continuous: bool) -> dict:
    outcomes: Counter = Counter()
    lock = threading.Lock()

    stop = threading.Event()

    def abuse() -> None:
        first = True
        while first or (continuous and not stop.is_set()):
            first = False
            try:
                status, _ = request(port, "POST", "/v1/chat/completions", body, timeout=give_up)
                what = str(status)
            except (TimeoutError, socket.timeout):
                what = "gave up"
            except OSError as e:
                what = type(e).__name__
            with lock:
                outcomes[what] += 1

    threads = [threading.Thread(target=abuse, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    health: list[float] = []

    def poll() -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                request(port, "GET", "/health", timeout=30)
                health.append(time.monotonic() - started)
            except OSError:
                health.append(float("inf"))
            time.sleep(0.2)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    normal = timed_chat(port, model, max_tokens)
    time.sleep(max(0.0, 1.0 - normal))  # at least a few /health polls under the abuse
    stop.set()
    poller.join()
    for t in threads:
        t.join(give_up + 30)
    return {"normal_s": normal, "health_max_s": max(health), "health_median_s": statistics.median(health),
            "health_polls": len(health), "abusive_outcomes": dict(outcomes)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default="qwen2.5-coder-1.5b")
    p.add_argument("--clients", type=int, default=40)
    p.add_argument("--give-up", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--kinds", default="s1,budget")
    p.add_argument("--modes", default="burst,continuous")
    p.add_argument("--out")
    args = p.parse_args()
    target = Path(args.target) if Path(args.target).exists() else store.ensure(load_registry().model(args.target))
    port = free_port()
    log = Path(f"/tmp/abuse-serve-{port}.log")
    cmd = [sys.executable, "-m", "specllama", "serve", "--target", str(target), "--no-draft", "--host", "127.0.0.1",
           "--port", str(port)]
    server = subprocess.Popen(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.DEVNULL,
                              stderr=log.open("wb"))
    try:
        deadline = time.monotonic() + 600
        while True:
            try:
                status, data = request(port, "GET", "/v1/models", timeout=5)
                model, n_ctx = json.loads(data)["data"][0]["id"], json.loads(data)["data"][0]["meta"]["n_ctx"]
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"serve did not start: {log.read_text()[-2000:]}")
                time.sleep(0.5)
        bodies = {"s1": chat(model, "<|im_end|>x" * 690_000, 16),
                  # under 2 x n_ctx x 128 bytes (Qwen's longest token): tokenized, then refused for its length
                  "budget": chat(model, "word " * (2 * n_ctx * 128 // 5 - 400), 16)}
        timed_chat(port, model, args.max_tokens)  # warm-up
        results: dict[str, dict] = {}
        for kind in args.kinds.split(","):
            for mode in args.modes.split(","):
                idle, abused = [], []
                for _ in range(args.rounds):
                    idle.append(timed_chat(port, model, args.max_tokens))
                    abused.append(abused_round(port, model, bodies[kind], args.clients, args.give_up, args.max_tokens,
                                               continuous=mode == "continuous"))
                median_abused = statistics.median(r["normal_s"] for r in abused)
                results[f"{kind} {mode}"] = {"body_bytes": len(bodies[kind]), "idle_s": idle, "abused": abused,
                                             "ratio_of_medians": median_abused / statistics.median(idle),
                                             "health_max_s": max(r["health_max_s"] for r in abused)}
                print(kind, mode, json.dumps(results[f"{kind} {mode}"]), file=sys.stderr)
    finally:
        server.send_signal(signal.SIGTERM)
        returncode = server.wait(timeout=60)
    result = {"machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "system": platform.platform()},
              "command": " ".join(cmd[3:]), "target": target.name, "n_ctx": n_ctx, "clients": args.clients,
              "give_up_s": args.give_up, "max_tokens": args.max_tokens, "rounds": args.rounds, "results": results,
              "sigterm_exit": returncode, "tracebacks_in_log": log.read_text(errors="replace").count("Traceback")}
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out + ".json").write_text(json.dumps(result, indent=2) + "\n")
        lines = [f"# serve under {args.clients} abusive requests: /health and a normal chat",
                 "",
                 f"Command: `flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/serve_abuse.py --out {args.out}`",
                 f"Machine: {result['machine']['cpu']}, {result['machine']['cores']} cores (shared with other jobs), "
                 f"{result['machine']['system']}.",
                 f"Server: `specllama {result['command']}` ({target.name}, context {n_ctx}, defaults otherwise). Normal "
                 f"chat: greedy, max_tokens {args.max_tokens}; abusive clients give up after {args.give_up:g} s; rounds "
                 "alternate idle and abused.", "",
                 "| abusive body, mode | bytes | normal chat idle (s) | under abuse (s) | ratio of medians "
                 "| /health slowest (s) | abusive answers |",
                 "|---|---|---|---|---|---|---|"]
        for kind, r in results.items():
            answers = Counter()
            for a in r["abused"]:
                answers.update(a["abusive_outcomes"])
            idle = ", ".join(f"{x:.2f}" for x in r["idle_s"])
            abused = ", ".join(f"{a['normal_s']:.2f}" for a in r["abused"])
            lines.append(f"| {kind} | {r['body_bytes']:,} | {idle} | {abused} | {r['ratio_of_medians']:.2f}x | "
                         f"{r['health_max_s']:.3f} | {dict(answers)} |")
        lines += ["", f"SIGTERM at the end: exit {returncode}; tracebacks in the server's log: {result['tracebacks_in_log']}."]
        Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
