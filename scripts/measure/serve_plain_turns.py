"""Plain decoding through `specllama serve` (drafter none) against llama-server, request by request, on
the agentic replay's requests (bench/agent_sessions.json's sessions, two turns each, with the answers
a plain run wrote), every request sent to both servers in turn, then all of them again in the other order.

Why: over the replay our plain server measured 0.95-0.96x of llama-server while `run --no-draft` is
at parity on short prompts. Sending each conversation twice shows what a prompt cache does when a
conversation comes back after others took the slot (llama-server's RAM cache restores it), which the
replay, each session once and in turn, never asks. Each answer is streamed: the time to its first
text (prefill, the request's own preparation) and the decode rate after it are apart, per server.

    flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/serve_plain_turns.py \
        --llama-server PATH [--rounds 2] [--out bench/measured/NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts" / "measure"))

import bench_serve as bs  # noqa: E402
from report_files import show_and_write  # noqa: E402

from specllama.llama.machine import cpu_model  # noqa: E402

ANSWERS = REPO / "bench" / "measured" / "vm-20261126-serve-replay-fair-spin.json"  # a plain run's texts


def conversations(sessions: dict, texts: list[str]) -> list[tuple[str, list[dict]]]:
    """Each request of the replay's sessions (bench_serve.py's first 3) as an agent sends them, with the
    answers a plain run wrote, in the order that run wrote them."""
    out, answers = [], iter(texts)
    for session in sessions["sessions"][:3]:
        messages = [{"role": "system", "content": sessions["system"]}]
        for n, change in enumerate(session["turns"]):
            messages = messages + [{"role": "user", "content": bs.agent_ask(session, n, change)}]
            out.append((f"{session['id']}/{n}", messages))
            messages = messages + [{"role": "assistant", "content": next(answers)}]
    return out


TARGET = Path.home() / ".cache/specllama/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"  # the default pair's


def server_settings(threads: int, llama_server: str | None) -> argparse.Namespace:
    """What bench_serve.py's server constructors read: fresh servers, --ctx 4096, parallel auto, no cost cache kept."""
    return argparse.Namespace(threads=threads, ctx=4096, parallel="auto", specllama_args=[], keep_costs=False,
                              llama_server=llama_server)


def replay_requests() -> list[tuple[str, list[dict]]]:
    """The replay's requests with a plain run's answers (`conversations`), from the files this script names."""
    texts = next(r for r in json.loads(ANSWERS.read_text()) if r["drafter"] == "none")["texts"]
    return conversations(json.loads((REPO / "bench" / "agent_sessions.json").read_text()), texts)


async def ask(server: bs.Server, messages: list[dict], extra: dict) -> tuple[float, float, int]:
    """(seconds to the first text, seconds in all, completion tokens), streamed: the first split
    tells prefill and the request's own preparation from the decode that follows."""
    async with server.client() as client:
        start = time.perf_counter()
        first, tokens = None, 0
        stream = await client.chat.completions.create(model=server.model, messages=messages, max_tokens=2000,
                                                      temperature=0, extra_body=extra, stream=True,
                                                      stream_options={"include_usage": True})
        async for chunk in stream:
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter() - start
            if chunk.usage:
                tokens = chunk.usage.completion_tokens
        return first or 0.0, time.perf_counter() - start, tokens


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--llama-server", required=True, metavar="PATH")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", help="write OUT.md and OUT.json")
    args = p.parse_args(argv)
    settings, target, convs = server_settings(args.threads, args.llama_server), TARGET, replay_requests()
    log = Path("/tmp/serve_plain_turns.log")
    ours = bs.specllama_server(settings, log)
    theirs = bs.llama_server(settings, target, "llama-server", log)
    runs = []
    try:
        for r in range(args.rounds):
            for cid, messages in convs:
                pair = [("specllama none", ours, {"drafter": "none"}), ("llama-server", theirs, {})]
                for name, server, extra in (pair if r % 2 == 0 else pair[::-1]):
                    first, seconds, tokens = asyncio.run(ask(server, messages, extra))
                    runs.append({"round": r, "request": cid, "server": name, "first_s": round(first, 3),
                                 "seconds": round(seconds, 3), "tokens": tokens})
                    rate = (tokens - 1) / (seconds - first) if seconds > first and tokens > 1 else 0.0
                    print(f"round {r} {cid:12s} {name:15s} first {first:5.2f} s, all {seconds:6.2f} s, {tokens} tokens, "
                          f"{rate:5.2f} tok/s after the first", flush=True)
    finally:
        ours.stop()
        theirs.stop()
    head = (f"{cpu_model()}, threads {args.threads}; target {target.name}; both servers fresh, --ctx 4096, greedy; "
            f"{args.rounds} rounds, each request to both servers in turn (the order flips each round)")
    lines = ["| round | request | tokens | specllama none: first s / all s / tok/s after | "
             "llama-server: first s / all s / tok/s after | ratio (all) |", "|---|---|---|---|---|---|"]

    def cell(x: dict) -> str:
        after = x["seconds"] - x["first_s"]
        rate = (x["tokens"] - 1) / after if after > 0 and x["tokens"] > 1 else 0.0
        return f"{x['first_s']:.2f} / {x['seconds']:.2f} / {rate:.2f}"

    for r in range(args.rounds):
        for cid, _ in convs:
            a, b = (next(x for x in runs if x["round"] == r and x["request"] == cid and x["server"] == s)
                    for s in ("specllama none", "llama-server"))
            lines.append(f"| {r} | {cid} | {a['tokens']}/{b['tokens']} | {cell(a)} | {cell(b)} | "
                         f"{b['seconds'] / a['seconds']:.3f}x |")
    totals = {s: sum(x["seconds"] for x in runs if x["server"] == s) for s in ("specllama none", "llama-server")}
    firsts = {s: sum(x["first_s"] for x in runs if x["server"] == s) for s in totals}
    lines += ["", f"total: specllama none {totals['specllama none']:.1f} s, llama-server {totals['llama-server']:.1f} s "
              f"({totals['llama-server'] / totals['specllama none']:.3f}x); of which to the first text: "
              f"{firsts['specllama none']:.1f} s and {firsts['llama-server']:.1f} s"]
    show_and_write(args.out, "Plain decoding through serve against llama-server, request by request", "serve_plain_turns.py",
                   argv if argv is not None else sys.argv[1:], head, lines, {"runs": runs})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
