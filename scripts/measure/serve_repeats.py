#!/usr/bin/env python3
"""One agent request sent N times to one fresh `specllama serve`, greedy, each answer's time and text
kept: does the same request give the same text, and at what speed, once the server has seen it?

The request is the agentic replay's first turn of a session (bench/agent_sessions.json: the system
prompt, the file and its first change), as bench_serve.py sends it. Why: a server answering the same
request again drafts from its earlier answers (the suffix drafter's history), and outside `--exact`
batch shapes change greedy near-ties, so a text that once left plain decoding's can be the one that
comes back; an earlier session also saw a few streamed answers of this request run 2-3 times slower.

    flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/serve_repeats.py --n 40 --stream \
        --out bench/measured/NAME [-- serve options, e.g. --drafter none or --exact]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_serve  # noqa: E402

from specllama.llama.machine import cpu_model  # noqa: E402


async def ask_repeatedly(server: bench_serve.Server, messages: list[dict], n: int, stream: bool) -> list[dict]:
    rows = []
    async with server.client() as client:
        for i in range(n):
            t0 = time.perf_counter()
            if stream:
                text, tokens = "", None
                chunks = await client.chat.completions.create(
                    model=server.model, messages=messages, max_tokens=512, temperature=0, stream=True,
                    stream_options={"include_usage": True})
                async for chunk in chunks:
                    if chunk.choices and chunk.choices[0].delta.content:
                        text += chunk.choices[0].delta.content
                    if chunk.usage:
                        tokens = chunk.usage.completion_tokens
            else:
                reply = await client.chat.completions.create(model=server.model, messages=messages, max_tokens=512,
                                                             temperature=0)
                text, tokens = reply.choices[0].message.content, reply.usage.completion_tokens
            seconds = time.perf_counter() - t0
            rows.append({"i": i, "seconds": round(seconds, 3), "chars": len(text), "tokens": tokens, "text": text})
            print(f"{i:3d} {seconds:6.2f} s {len(text):5d} chars {tokens} tokens", flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=40, help="times the request is sent (default %(default)s)")
    ap.add_argument("--session", default="textstats", help="which session's first turn (default %(default)s)")
    ap.add_argument("--stream", action="store_true", help="stream each answer (default: whole)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, help="write OUT.json (every text) and OUT.md")
    ap.add_argument("serve_args", nargs="*", help="after --: options for specllama serve")
    args = ap.parse_args()
    system, prompt = bench_serve.first_request(args.session)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
    server_args = argparse.Namespace(threads=args.threads, ctx=4096, parallel="auto", specllama_args=args.serve_args,
                                     keep_costs=False)
    log = Path(tempfile.mkdtemp(prefix="serve-repeats-")) / "serve.log"
    server = bench_serve.specllama_server(server_args, log)
    try:
        rows = asyncio.run(ask_repeatedly(server, messages, args.n, args.stream))
    finally:
        server.stop()
    texts = Counter(r["text"] for r in rows)
    seconds = sorted(r["seconds"] for r in rows)
    lines = [f"# {args.session}/0 sent {args.n} times to one specllama serve ({time.strftime('%Y-%m-%d %H:%M')})", "",
             f"serve {' '.join(args.serve_args) or '(defaults)'}, --threads {args.threads}, greedy, "
             f"{'streamed' if args.stream else 'whole answers'}; {cpu_model()}, {os.cpu_count()} cores; "
             "the default pair; a fresh server with an empty cost cache",
             "", f"seconds: first {rows[0]['seconds']}, median {seconds[len(seconds) // 2]}, max {seconds[-1]}", "",
             "| text | answers | characters | tokens | which answers |", "|---|---|---|---|---|"]
    for number, (text, count) in enumerate(texts.most_common(), start=1):
        mine = [r for r in rows if r["text"] == text]
        lines.append(f"| {number} | {count} | {len(text)} | {mine[0]['tokens']} | "
                     f"{', '.join(str(r['i']) for r in mine[:12])}{' ...' if len(mine) > 12 else ''} |")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        args.out.with_suffix(".md").write_text(report)
        args.out.with_suffix(".json").write_text(json.dumps({"session": args.session, "serve_args": args.serve_args,
                                                             "stream": args.stream, "answers": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
