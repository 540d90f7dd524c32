"""Where a plain step's time goes in `specllama serve` and in `specllama run`: per one-row decode, the time
inside llama_decode and the time outside it on the decoding thread (the engine's Python, and in serve the
hand-off of each token to the event loop that streams it), with llama-server's own per-token time beside.

Why: request by request, plain serve measured 0.94-0.95x of llama-server (bench/measured/
xeon-20261127-serve-plain-one-thread) while `run --no-draft` was level (1.014x). A gap inside llama_decode
would point at the context (its cache, its threads); one outside at serve's own work per token.

Each round, one after another: a fresh `serve --drafter none` answers the prompt three times, the first
to warm it, then streamed and whole (not streamed: no token handed to the event loop until the end) in
an order that flips each round, each logged; `specllama run --no-draft` answers it; a fresh llama-server
answers it twice and the second answer's `timings` are read. A sitecustomize hook
(scripts/measure/step_log_hook) logs the clock and the context's seconds inside llama_decode at the start
of every decode, so each one-row step splits in two. --session NAME sends that agent session's first
request (bench/agent_sessions.json: its system message and file) instead of a short question.

    flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/serve_step_split.py \
        --llama-server PATH [--rounds 3] [-n 200] [--session textstats] [--out bench/measured/NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts" / "measure"))

import bench_serve as bs  # noqa: E402
import serve_plain_turns as spt  # noqa: E402
from report_files import show_and_write  # noqa: E402

from specllama.llama.machine import cpu_model  # noqa: E402

HOOK = REPO / "scripts" / "measure" / "step_log_hook"
QUESTION = "Explain how a hash map works in Python, with a short example implementation."


def one_row_steps(log: Path) -> list[tuple[float, float]]:
    """(seconds inside llama_decode, seconds outside it) of every one-row decode followed by another decode
    of the same context: the step from one decode's start to the next one's."""
    rows = [line.split() for line in log.read_text().splitlines()]
    steps = []
    for a, b in zip(rows, rows[1:]):
        if a[3] == b[3] and a[2] == "1":
            wall, inside = float(b[0]) - float(a[0]), float(b[1]) - float(a[1])
            if 0 < wall < 1:  # not across a pause between requests
                steps.append((inside, wall - inside))
    return steps


def medians_ms(steps: list[tuple[float, float]]) -> tuple[float, float]:
    return tuple(statistics.median(s[i] for s in steps) * 1000 for i in (0, 1))


def logged_env(log: Path) -> dict:
    path = os.pathsep.join(filter(None, [str(HOOK), str(REPO), os.environ.get("PYTHONPATH")]))
    return {"SPECLLAMA_STEP_LOG": str(log), "PYTHONPATH": path}


async def answer(server: bs.Server, messages: list[dict], n: int, stream: bool) -> None:
    async with server.client() as client:
        reply = await client.chat.completions.create(model=server.model, messages=messages, max_tokens=n,
                                                     temperature=0, stream=stream, extra_body={"drafter": "none"})
        if stream:
            async for _ in reply:
                pass


def llama_server_timings(server: bs.Server, messages: list[dict], n: int) -> dict:
    body = json.dumps({"messages": messages, "max_tokens": n, "temperature": 0}).encode()
    request = urllib.request.Request(server.url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=1200) as r:
        return json.loads(r.read())["timings"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--llama-server", required=True, metavar="PATH")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("-n", type=int, default=200, help="tokens an answer (default 200)")
    p.add_argument("--session", help="send this agent session's first request, not a short question")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", help="write OUT.md and OUT.json")
    args = p.parse_args(argv)
    system, prompt = None, QUESTION
    if args.session:
        system, prompt = bs.first_request(args.session)
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    settings = spt.server_settings(args.threads, args.llama_server)
    scratch = Path(tempfile.mkdtemp(prefix="serve-step-split-"))
    (scratch / "prompt.txt").write_text(prompt)
    server_log, rounds = scratch / "servers.log", []
    for r in range(args.rounds):
        serve_log, run_log = scratch / f"serve-{r}.log", scratch / f"run-{r}.log"
        ours = bs.specllama_server(settings, server_log, env=logged_env(serve_log))
        serve_steps = {}
        try:
            asyncio.run(answer(ours, messages, args.n, True))  # warms it
            for stream in ((True, False) if r % 2 == 0 else (False, True)):
                serve_log.write_text("")  # this answer only
                asyncio.run(answer(ours, messages, args.n, stream))
                serve_steps[stream] = one_row_steps(serve_log)
        finally:
            ours.stop()
        cmd = [sys.executable, "-m", "specllama", "run", "--no-draft", "-n", str(args.n), "-t", str(args.threads), "-q",
               *(["--system", system] if system else []), "-f", str(scratch / "prompt.txt")]
        subprocess.run(cmd, cwd=REPO, env={**bs.base_env(), **logged_env(run_log)}, stdout=subprocess.DEVNULL, check=True)
        theirs = bs.llama_server(settings, spt.TARGET, "llama-server", server_log)
        try:
            llama_server_timings(theirs, messages, args.n)
            timings = llama_server_timings(theirs, messages, args.n)
        finally:
            theirs.stop()
        run_steps = one_row_steps(run_log)
        rounds.append({"round": r, "serve_ms": medians_ms(serve_steps[True]), "serve_steps": len(serve_steps[True]),
                       "serve_whole_ms": medians_ms(serve_steps[False]), "serve_whole_steps": len(serve_steps[False]),
                       "run_ms": medians_ms(run_steps), "run_steps": len(run_steps),
                       "llama_server_ms_per_token": timings["predicted_per_token_ms"],
                       "llama_server_tokens": timings["predicted_n"]})
        print(f"round {r}: {rounds[-1]}", flush=True)
    head = (f"{cpu_model()}, threads {args.threads}; target {spt.TARGET.name}; greedy, {args.n} tokens; "
            f"{'agent session ' + args.session + ', its first request' if args.session else 'a short question'}; "
            f"median per one-row step, ms")
    lines = ["| round | serve, streamed: inside / outside llama_decode | serve, whole | run: inside / outside | "
             "llama-server per token |", "|---|---|---|---|---|"]
    for x in rounds:
        lines.append(f"| {x['round']} | {x['serve_ms'][0]:.2f} / {x['serve_ms'][1]:.2f} (n {x['serve_steps']}) | "
                     f"{x['serve_whole_ms'][0]:.2f} / {x['serve_whole_ms'][1]:.2f} (n {x['serve_whole_steps']}) | "
                     f"{x['run_ms'][0]:.2f} / {x['run_ms'][1]:.2f} (n {x['run_steps']}) | "
                     f"{x['llama_server_ms_per_token']:.2f} (n {x['llama_server_tokens']}) |")
    show_and_write(args.out, "A plain step split: inside and outside llama_decode, serve against run",
                   "serve_step_split.py", argv if argv is not None else sys.argv[1:], head, lines, {"rounds": rounds})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
