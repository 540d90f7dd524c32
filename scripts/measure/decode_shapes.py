"""What a draft decode costs when the batch shapes change from one decode to the next.

The draft model's decodes in the speculative loop are not a steady run of one-token decodes: each
step starts with a catch-up of two tokens (the last accepted draft and the target's token), then
one token per draft position. llama.cpp's CUDA backend replays a captured CUDA graph only after
two decodes in a row with the same graph properties (ggml-cuda.cu, graph warmup) and captures it
again after every change, so the 2,1,1,1 pattern may never run from a warm graph. That would
explain why a draft token cost 3.6 ms in our loop on an H100 against 1.16 ms in llama-bench, and
why GGML_CUDA_DISABLE_GRAPHS=1 made no difference to the draft loop (207 vs 211 tok/s) while
plain decoding lost a third (../shared/device/README.md). On a CPU there are no graphs: the
patterns should cost what their tokens cost.

Patterns, each timed over the same number of draft positions (interleaved rounds, medians):
  steady   1,1,1,1,...            llama-bench's tg: the floor
  loop     2,1,1,1, 2,1,1,1, ...  what ModelDrafter does at K = 4 (catch-up, then 3 positions)
  split    1,1,1,1,1, ...         the catch-up as two one-token decodes: one more decode, one shape
                                  (its first without logits, as ModelDrafter's split catch-up:
                                  llama.cpp keeps that graph apart, decoding/catch_up.py)

    python scripts/measure/decode_shapes.py [--model PATH] [--gpu-layers N] [--steps 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

from shape_context import add_model_arguments, open_context

from specllama.llama.context import DecodeContext, DecodePart

LAST, NONE = "last", "none"
PATTERNS = {"steady": [(1, LAST)] * 4, "loop": [(2, LAST)] + [(1, LAST)] * 3, "split": [(1, NONE)] + [(1, LAST)] * 4}
K = 4  # draft positions a step: every pattern drafts this many tokens a step


def time_pattern(ctx: DecodeContext, shape: list[tuple[int, str]], steps: int, token: int) -> float:
    """Milliseconds per draft position: the pattern's decodes for `steps` steps over K positions,
    rolling the cache back every 256 tokens so attention cost stays comparable."""
    ctx.clear()
    ctx.decode([token] * 32, logits="none")
    start = time.perf_counter()
    for _ in range(steps):
        if ctx.n_past > 288:
            ctx.rollback(32)
        for n, logits in shape:
            ctx.decode_parts([DecodePart(0, [token] * n, logits)])
    return (time.perf_counter() - start) * 1e3 / (steps * K)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_arguments(ap, "draft")
    ap.add_argument("--steps", type=int, default=64, help="steps per pattern and round (default 64)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    args = ap.parse_args(argv)

    path, ctx, threads = open_context(args, "draft")
    token = 100
    for shape in PATTERNS.values():  # warm-up: first decodes allocate, graphs are captured
        time_pattern(ctx, shape, 4, token)
    times: dict[str, list[float]] = {name: [] for name in PATTERNS}
    for _ in range(args.rounds):
        for name, shape in PATTERNS.items():
            times[name].append(time_pattern(ctx, shape, args.steps, token))
    print(f"{path}; {platform.processor() or platform.machine()}, {threads} threads, gpu layers {args.gpu_layers}; "
          f"{args.steps} steps x {K} draft positions, {args.rounds} rounds")
    steady = statistics.median(times["steady"])
    for name, shape in PATTERNS.items():
        med = statistics.median(times[name])
        print(f"  {name:7s} {','.join(str(n) for n, _ in shape):10s} {med:7.3f} ms a draft position "
              f"({med / steady:.2f}x steady; rounds {', '.join(f'{t:.3f}' for t in times[name])})")
    ctx.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
