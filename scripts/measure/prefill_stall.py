"""How long a request that is generating waits while another request's long prompt is prefilled.

One server with two slots; a streamed short request A (an answer of --a-tokens tokens) starts;
after its 10th token, a request B with a long prompt (--long-chars of the repository's own source,
a different stretch each round so no prompt cache holds it; 5 tokens back) is sent. Printed per
server and round: A's longest wait between two tokens after B was sent, A's whole time, B's time to
its first token. `specllama serve` (the checkout this runs in) and, with --llama-server, llama.cpp's
own server, both `--parallel 2` / `-np 2` on the same target file and threads, interleaved by round.

    SPECLLAMA_THREAD_WAIT=spin flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/prefill_stall.py \\
        --llama-server PATH --out bench/measured/vm-20261126-prefill-stall
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts" / "measure"))

from bench_serve import Server, free_port  # noqa: E402
from report_files import measured_model, write_report  # noqa: E402

from specllama.llama.machine import cpu_model  # noqa: E402

SHORT = "Write a Python function that checks whether a string is a palindrome, with a docstring and three examples."


def stream(url: str, model: str, content: str, max_tokens: int, arrivals: list[float], sent: threading.Event | None = None,
           after: int = 0) -> None:
    """POST a streamed chat request; each content delta's arrival time goes to `arrivals`; `sent`
    is set after `after` deltas."""
    body = {"model": model, "stream": True, "max_tokens": max_tokens, "temperature": 0,
            "messages": [{"role": "user", "content": content}]}
    with httpx.Client(timeout=1200) as client, client.stream("POST", url + "/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choices = json.loads(line[6:]).get("choices") or [{}]
            if (choices[0].get("delta") or {}).get("content"):
                arrivals.append(time.perf_counter())
                if sent is not None and len(arrivals) == after:
                    sent.set()


def one_round(server: Server, long_prompt: str, a_tokens: int) -> dict:
    a_times: list[float] = []
    b_times: list[float] = []
    tenth = threading.Event()
    t0 = time.perf_counter()
    a = threading.Thread(target=stream, args=(server.url, server.model, SHORT, a_tokens, a_times, tenth, 10))
    a.start()
    tenth.wait(600)
    t_b = time.perf_counter()
    b = threading.Thread(target=stream, args=(server.url, server.model, long_prompt + "\n\nWhat does this code do? "
                                              "One sentence.", 5, b_times))
    b.start()
    a.join()
    b.join()
    gaps = [y - x for x, y in zip(a_times, a_times[1:]) if y > t_b]
    return {"a_tokens": len(a_times), "a_seconds": round(a_times[-1] - t0, 2),
            "a_longest_wait": round(max(gaps), 2) if gaps else None,
            "a_tokens_after_b": sum(1 for t in a_times if t > t_b),
            "b_first_token": round(b_times[0] - t_b, 2) if b_times else None,
            "b_seconds": round(b_times[-1] - t_b, 2) if b_times else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--a-tokens", type=int, default=300, help="the generating request's answer length")
    ap.add_argument("--long-chars", type=int, default=20000, help="characters of source in the long prompt (~4 a token)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=16384)
    ap.add_argument("--llama-server", help="llama.cpp's llama-server binary, to run beside specllama serve")
    ap.add_argument("--out", help="write OUT.md and OUT.json")
    args = ap.parse_args(argv)
    target = measured_model()
    source = "".join(f.read_text() for f in sorted((REPO / "specllama").rglob("*.py")))
    logs = Path(tempfile.mkdtemp(prefix="prefill-stall-"))
    arms = ["specllama"] + (["llama-server"] if args.llama_server else [])
    runs = []
    for r in range(args.rounds):
        long_prompt = source[r * args.long_chars:(r + 1) * args.long_chars]
        for arm in (arms if r % 2 == 0 else arms[::-1]):
            port = free_port()
            if arm == "specllama":
                scratch = Path(tempfile.mkdtemp(prefix="prefill-stall-"))
                cmd = [sys.executable, "-m", "specllama", "serve", "--port", str(port), "--threads", str(args.threads),
                       "--ctx", str(args.ctx), "--parallel", "2"]
                server = Server(arm, cmd, port, logs / "specllama.log", scratch=scratch,
                                env={"SPECLLAMA_PROMPT_CACHE": str(scratch / "pc"), "SPECLLAMA_COSTS": str(scratch / "c")})
            else:
                cmd = [args.llama_server, "-m", str(target), "-t", str(args.threads), "-c", str(args.ctx), "-np", "2",
                       "--host", "127.0.0.1", "--port", str(port)]
                server = Server(arm, cmd, port, logs / "llama-server.log")
            try:
                stream(server.url, server.model, "Say hi.", 5, [])  # warm-up: the first decode pages the model in
                run = {"round": r, "server": arm, **one_round(server, long_prompt, args.a_tokens)}
            finally:
                server.stop()
            runs.append(run)
            print(json.dumps(run), flush=True)
    git = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    head = (f"Machine: {cpu_model()}, threads {args.threads}, thread wait {os.environ.get('SPECLLAMA_THREAD_WAIT', 'auto')}; "
            f"target {target.name}; --ctx {args.ctx}, two slots; specllama at {git}; long prompt {args.long_chars} "
            f"characters of specllama/'s source (a different stretch each round); A asks for {args.a_tokens} tokens")
    lines = ["| round | server | A: longest wait between tokens after B came | A: tokens after B came | A: seconds | "
             "B: first token after | B: seconds |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {x['round']} | {x['server']} | {x['a_longest_wait']} s | {x['a_tokens_after_b']} | {x['a_seconds']} | "
              f"{x['b_first_token']} s | {x['b_seconds']} |" for x in runs]
    for arm in arms:
        mine = [x for x in runs if x["server"] == arm]
        lines.append(f"\n{arm}: median longest wait {statistics.median(x['a_longest_wait'] or 0 for x in mine)} s, "
                     f"B's first token {statistics.median(x['b_first_token'] or 0 for x in mine)} s")
    print(head + "\n" + "\n".join(lines))
    if args.out:
        write_report(args.out, "A generating request's wait while another's long prompt is prefilled", "prefill_stall.py",
                     argv, head, lines, {"runs": runs})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
