"""Unified vs per-sequence KV cache for several prompts per decode: which one to use.

In a unified cache every sequence's attention scans the cells of all sequences (masked), so its
cost grows with the sum of their lengths; a per-sequence cache (llama.cpp kv_unified = false)
gives each sequence its own stream. Both hold N x n_ctx cells here. N sequences, each a prompt of
PROMPT tokens, then STEPS decodes of one token per sequence; rounds interleave the two layouts.

    python scripts/measure/kv_layout.py [--n 4 8] [--prompt 512] [--steps 32] [--rounds 3] [--model PATH]
"""

from __future__ import annotations

import argparse
import statistics
import time

from report_files import measured_model

from specllama.llama.backend import default_threads
from specllama.llama.context import DecodeContext, DecodePart
from specllama.llama.model import GGUFModel


def tokens_per_s(model: GGUFModel, n: int, unified: bool, prompt: int, steps: int, threads: int) -> float:
    per_seq = prompt + steps + 8
    ctx = DecodeContext(model, n_ctx=per_seq * n if unified else per_seq, n_seq_max=n, unified=unified,
                        n_threads=threads)
    try:
        vocab = model.n_vocab
        for s in range(n):  # different prompts, as a batch job has
            ctx.decode([(1000 + 37 * s + i) % vocab for i in range(prompt)], logits="none", seq=s)
        start = time.perf_counter()
        for step in range(steps):
            ctx.decode_parts([DecodePart(s, [(2000 + s + step) % vocab], "all") for s in range(n)])
        return n * steps / (time.perf_counter() - start)
    finally:
        ctx.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model", help="a GGUF path or registry name (default: the default pair's target)")
    ap.add_argument("--threads", type=int, default=default_threads())
    args = ap.parse_args()
    path = measured_model(args.model)
    model = GGUFModel(path)
    results: dict[tuple[int, bool], list[float]] = {}
    for _ in range(args.rounds):
        for n in args.n:
            for unified in (False, True):
                results.setdefault((n, unified), []).append(
                    tokens_per_s(model, n, unified, args.prompt, args.steps, args.threads))
    print(f"{path.name}, {args.threads} threads, prompts of {args.prompt} tokens, {args.steps} steps, "
          f"medians of {args.rounds} interleaved rounds")
    print("| N | per-sequence cache tok/s | unified cache tok/s | unified / per-sequence |")
    print("|---|---|---|---|")
    for n in args.n:
        split, unified = statistics.median(results[(n, False)]), statistics.median(results[(n, True)])
        print(f"| {n} | {split:.2f} | {unified:.2f} | {unified / split:.3f} |")
    model.close()


if __name__ == "__main__":
    main()
