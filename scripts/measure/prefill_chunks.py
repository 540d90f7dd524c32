"""What the size of a prompt's chunks costs (decoding/prefill.py's PREFILL_CHUNK), and where the
chunking changes the cache's bits.

Throughput: 512 prompt tokens decoded in chunks of each size on top of cache fills of --fills
tokens (interleaved rounds, medians), through the engine's own DecodeContext. Bits: one prompt
(--bits-prompt tokens) decoded in chunks of each --bits-chunks size, then the same 4 tokens with
logits at every row; each chunking's logits compared with the first's (identical, or the largest
difference). A long prompt's chunks are decoded between the engine's steps, so their size is what
the requests already generating wait between two tokens, and what a cancelled request still runs.

    flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/prefill_chunks.py \\
        --out bench/measured/vm-20261126-prefill-chunks
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts" / "measure"))

from report_files import measured_model, write_report  # noqa: E402

from specllama.llama.backend import default_threads  # noqa: E402
from specllama.llama.context import DecodeContext  # noqa: E402
from specllama.llama.machine import cpu_model  # noqa: E402
from specllama.llama.model import GGUFModel  # noqa: E402

MEASURED = 512  # prompt tokens timed per chunk size


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def prompt_in_chunks(ctx: DecodeContext, tokens: list[int], chunk: int) -> None:
    for start in range(0, len(tokens), chunk):
        ctx.decode(tokens[start:start + chunk], logits="none")


def throughput(ctx: DecodeContext, tokens: list[int], fills: list[int], chunks: list[int], rounds: int) -> list[dict]:
    out = []
    for fill in fills:
        ctx.clear()
        prompt_in_chunks(ctx, tokens[:fill], 512)
        times: dict[int, list[float]] = {c: [] for c in chunks}
        for r in range(rounds + 1):  # round 0 warms up and is dropped
            for c in (chunks if r % 2 == 0 else chunks[::-1]):
                start = time.perf_counter()
                prompt_in_chunks(ctx, tokens[fill:fill + MEASURED], c)
                if r:
                    times[c].append(time.perf_counter() - start)
                ctx.rollback(fill)
        for c in chunks:
            seconds = statistics.median(times[c])
            out.append({"fill": fill, "chunk": c, "tok_s": round(MEASURED / seconds, 1),
                        "chunk_s": round(seconds * c / MEASURED, 2), "rounds_s": [round(t, 3) for t in times[c]]})
            print(f"fill {fill} chunk {c}: {MEASURED / seconds:.1f} tok/s", flush=True)
    return out


def bits(ctx: DecodeContext, tokens: list[int], n: int, chunks: list[int]) -> list[dict]:
    out, first = [], None
    for c in chunks:
        ctx.clear()
        prompt_in_chunks(ctx, tokens[:n], c)
        rows = np.array(ctx.decode(tokens[n:n + 4], logits="all"), copy=True)
        first = rows if first is None else first
        diff = float(np.abs(rows - first).max())
        pieces = [min(c, n - s) for s in range(0, n, c)]
        out.append({"chunk": c, "smallest_piece": min(pieces), "max_logit_diff": diff})
        print(f"chunks of {c} (smallest piece {min(pieces)}): " + ("identical" if diff == 0 else f"differ by {diff:.3f}"),
              flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a GGUF path or registry name (default: the default pair's target)")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: all cores)")
    ap.add_argument("--fills", default="0,2048,6144", help="cache fills under the timed tokens (default 0,2048,6144)")
    ap.add_argument("--chunks", default="64,128,256,512", help="chunk sizes timed (default 64,128,256,512)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--bits-prompt", type=int, default=1400, help="the prompt the chunkings' bits are compared on")
    ap.add_argument("--bits-chunks", default="512,384,256,128,100,192,96,64,37",
                    help="chunk sizes whose caches are compared (the first is the reference)")
    ap.add_argument("--out", help="write OUT.md and OUT.json")
    args = ap.parse_args(argv)

    path = measured_model(args.model)
    threads = args.threads or default_threads()
    fills, chunks = ints(args.fills), ints(args.chunks)
    ctx = DecodeContext(GGUFModel(path), n_ctx=max(max(fills) + MEASURED, args.bits_prompt + 4) + 16, n_threads=threads)
    tokens = [500 + (i * 7) % 4000 for i in range(ctx.n_ctx)]
    speed = throughput(ctx, tokens, fills, chunks, args.rounds)
    same = bits(ctx, tokens, args.bits_prompt, ints(args.bits_chunks))
    ctx.close()
    head = (f"{Path(path).name}; {cpu_model()}, {threads} threads, thread wait "
            f"{os.environ.get('SPECLLAMA_THREAD_WAIT', 'auto')}; {MEASURED} prompt tokens per timing, "
            f"{args.rounds} interleaved rounds after a warm-up, medians")
    lines = ["| cache fill | " + " | ".join(f"chunks of {c}: tok/s (s a chunk)" for c in chunks) + " |",
             "|---|" + "---|" * len(chunks)]
    for fill in fills:
        cells = [r for r in speed if r["fill"] == fill]
        lines.append(f"| {fill} | " + " | ".join(f"{r['tok_s']} ({r['chunk_s']})" for r in cells) + " |")
    lines += ["", f"The next 4 rows' logits after a {args.bits_prompt}-token prompt decoded in chunks of each size, "
              f"against chunks of {same[0]['chunk']}:", "", "| chunk | smallest piece | largest logit difference |",
              "|---|---|---|"]
    for r in same:
        diff = "identical" if r["max_logit_diff"] == 0 else round(r["max_logit_diff"], 3)
        lines.append(f"| {r['chunk']} | {r['smallest_piece']} | {diff} |")
    print("\n".join(lines))
    if args.out:
        write_report(args.out, "Prompt chunk size: throughput and the cache's bits", "prefill_chunks.py", argv, head,
                     lines, {"throughput": speed, "bits": same})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
