"""Exact mode's row independence per weight type: is each row of an n-token batch bit-identical to
the same token decoded alone?

Exact mode (GGUFModel(exact=True), DecodeContext(exact=True)) turns off ggml's repacked weights and
keeps attention on a per-row path; that was measured on Q4_K_M. llamafile's tinyBLAS, compiled into
this build, still takes batched matmuls of F32/F16/BF16/Q8_0/Q4_0/Q5_0/IQ4_NL weights from 2 rows
on, with its own summation order. This requantizes the registry's Qwen2.5-Coder 1.5B Q4_K_M to Q8_0
and to pure Q4_0 and Q5_0 (every matrix, output layer included) and, for each file, decodes a prompt, then
8 greedy tokens one at a time (the reference rows), then the same tokens in batches of n = 1..8 (--max-n)
from the same cache, and prints per n the largest |batch row - reference row| over all rows.

Usage (loads four 1.5B files, ~4 min on 2 cores; requantized files are kept for reuse):
  flock /tmp/specllama-models.lock python scripts/measure/exact_rows.py [--threads N] [extra.gguf ...]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from specllama.llama.context import DecodeContext
from specllama.llama.model import GGUFModel
from specllama.llama.quantize import quantize
from specllama.models import store

SOURCE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
PROMPT = "Write a Python function that merges two sorted lists."


def requantized(src: Path, type_name: str) -> Path:
    dst = store.models_dir() / "measure" / f"{src.stem.removesuffix('-q4_k_m')}-pure-{type_name.lower()}.gguf"
    if not dst.exists():
        dst.parent.mkdir(parents=True, exist_ok=True)
        partial = dst.with_name(dst.name + ".partial")
        quantize(src, partial, type_name, pure=True)
        partial.replace(dst)
    return dst


def row_differences(path: Path, threads: int | None, max_n: int) -> list[tuple[int, float, int]]:
    """(n, max abs difference over the n rows, rows not bit-identical) for n = 1..max_n."""
    model = GGUFModel(path, exact=True)
    ctx = DecodeContext(model, n_ctx=512, n_threads=threads, exact=True)
    try:
        prefix = model.prompt_tokens(PROMPT)
        row = ctx.decode(prefix, logits="last")[0]  # the same cache under every batch below
        tokens, reference = [], []
        for _ in range(max_n):  # plain decoding, one token a decode
            tokens.append(int(np.argmax(row)))
            row = ctx.decode(tokens[-1:], logits="last")[0]
            reference.append(row)
        out = []
        for n in range(1, max_n + 1):
            ctx.rollback(len(prefix))
            rows = ctx.decode(tokens[:n], logits="all")
            diffs = [float(np.max(np.abs(rows[i] - reference[i]))) for i in range(n)]
            out.append((n, max(diffs), sum(d != 0.0 for d in diffs)))
        return out
    finally:
        ctx.close()
        model.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--max-n", type=int, default=8)
    ap.add_argument("--only-extra", action="store_true", help="measure only the files given")
    ap.add_argument("extra", nargs="*", type=Path, help="more GGUF files to measure")
    args = ap.parse_args()
    src = store.models_dir() / SOURCE
    files = [] if args.only_extra else [("Q4_K_M", src), ("Q8_0", requantized(src, "Q8_0")), ("Q4_0", requantized(src, "Q4_0")),
                                             ("Q5_0", requantized(src, "Q5_0"))]
    files += [(p.stem, p) for p in args.extra]
    for label, path in files:
        print(f"\n{label}  ({path.name}, exact mode, threads={args.threads or 'default'})")
        print(f"{'n':>3}  {'max |batch row - alone|':>24}  rows differing")
        for n, diff, n_diff in row_differences(path, args.threads, args.max_n):
            print(f"{n:>3}  {diff:>24.6g}  {n_diff}/{n}")


if __name__ == "__main__":
    main()
