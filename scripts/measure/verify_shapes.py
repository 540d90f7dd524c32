#!/usr/bin/env python3
"""What a target decode costs when the verify batch's row count changes from one step to the next.

llama.cpp's CUDA backend replays a captured CUDA graph only after two decodes in a row with the same
graph properties, and the row count is one of them (ggml-cuda.cu, ggml_backend_cuda_graph_compute:
a change resets the warm-up; the graph is keyed by the graph's first node, which a rebuilt graph of
another size reuses). In the speculative loop the row count is 1 on a plain step and 1 + K on a
drafting step, K varying: if the reasoning holds, a drafting step runs without a graph AND so do the
plain steps right after it (the first after a change runs directly, the second is captured), so an
isolated draft costs more than its own T(n): a cost the step costs (cost/online.py) never charge it,
since T(1) is the median of plain steps, most of which are warm. On the lent H100 our own costs came
out T(2)/T(1) = 1.85 and T(8)/T(1) = 3.5 (bench/measured/lent-20261126-r2-gpu-heldout-t0.md), where
llama-bench's prompt batches (steady shapes) showed 1.2-1.5. On a CPU there are no graphs: every
pattern should cost what its rows cost.

Patterns of row counts, repeated; each decode verifies greedily the way the engine does (every row's
argmax, ids_only) and the cache keeps one token a step, as after a rejected draft:
  steady-N     N, N, N, ...              warm graphs: the floor for N rows
  every8-N     N, 1, 1, 1, 1, 1, 1, 1    an isolated draft among plain steps: each position timed
  alt-N        1, N, 1, N, ...           drafting every other step
With --backend-greedy the argmax of every row is taken on the device (llama.cpp's backend sampling,
a greedy chain per sequence: llama/device_argmax.py, EXPERIMENTAL in llama.cpp) and only the token ids come back, instead of
each row's 152k logits (600 kB) copied to the host and scanned by numpy: what that saves per row.
Reported: the median milliseconds of each position in the pattern, over interleaved rounds, and for
every8-N the excess of its 7 plain steps over steady-1's (what the draft costs the steps after it).

    python scripts/measure/verify_shapes.py [--model PATH] [--gpu-layers -1] [--rounds 3] [--json OUT]
    GGML_CUDA_DISABLE_GRAPHS=1 python scripts/measure/verify_shapes.py ...   (the same without graphs)
    python scripts/measure/verify_shapes.py --gpu-layers -1 --backend-greedy     (argmax on the device)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

from shape_context import add_model_arguments, open_context

from specllama.llama.context import DecodeContext, DecodePart

SIZES = (2, 4, 8, 16, 64)


def patterns(sizes=SIZES) -> dict[str, list[int]]:
    out = {"steady-1": [1]}
    out.update({f"steady-{n}": [n] for n in sizes})
    out.update({f"every8-{n}": [n] + [1] * 7 for n in sizes})
    out.update({f"alt-{n}": [1, n] for n in sizes if n <= 8})
    return out


def time_pattern(ctx: DecodeContext, shape: list[int], cycles: int, token: int) -> list[list[float]]:
    """Milliseconds of each decode, per position of the pattern: `cycles` repeats of it. Each decode
    appends its rows and the cache keeps one of them (a rejected draft); the cache goes back to 32
    tokens past 288 so attention costs the same throughout (llama.cpp pads the cells it reads to 256)."""
    ctx.clear()
    ctx.decode([token] * 32, logits="none")
    times: list[list[float]] = [[] for _ in shape]
    for _ in range(cycles):
        for i, n in enumerate(shape):
            if ctx.n_past + n > 288:
                ctx.rollback(32)
            keep = ctx.n_past + 1
            start = time.perf_counter()
            ctx.decode_parts([DecodePart(0, [token] * n, "argmax")])  # reads every row: the GPU has finished
            times[i].append((time.perf_counter() - start) * 1e3)
            ctx.rollback(keep)
    return times


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_arguments(ap, "target")
    ap.add_argument("--cycles", type=int, default=12, help="repeats of each pattern a round (default 12)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="draft row counts (default %(default)s)")
    ap.add_argument("--backend-greedy", action="store_true", help="the argmax on the device (llama.cpp backend sampling)")
    ap.add_argument("--json", help="write the per-position medians here too")
    args = ap.parse_args(argv)

    path, ctx, threads = open_context(args, "target", backend_argmax=args.backend_greedy)
    token = 100
    shapes = patterns(tuple(int(s) for s in args.sizes.split(",")))
    for shape in shapes.values():  # warm-up: first decodes allocate
        time_pattern(ctx, shape, 2, token)
    samples: dict[str, list[list[float]]] = {name: [[] for _ in shape] for name, shape in shapes.items()}
    for _ in range(args.rounds):
        for name, shape in shapes.items():
            for i, ts in enumerate(time_pattern(ctx, shape, args.cycles, token)):
                samples[name][i] += ts
    ctx.close()
    medians = {name: [statistics.median(ts) for ts in per] for name, per in samples.items()}
    graphs = "off (GGML_CUDA_DISABLE_GRAPHS=1)" if os.environ.get("GGML_CUDA_DISABLE_GRAPHS") else "default"
    argmax = "on the device (backend greedy sampler)" if args.backend_greedy else "numpy over each row's logits"
    print(f"{path.name}; {platform.processor() or platform.machine()}, {threads} threads, gpu layers {args.gpu_layers}, "
          f"CUDA graphs {graphs}, argmax {argmax}; {args.cycles} cycles x {args.rounds} rounds, median ms per decode")
    t1 = medians["steady-1"][0]
    print(f"  {'pattern':10s} {'rows':22s} ms per position (xT1 = / steady-1's {t1:.3f} ms)")
    for name, shape in shapes.items():
        ms = medians[name]
        line = " ".join(f"{m:.3f}" for m in ms)
        extra = ""
        if name.startswith("every8-"):
            excess = sum(ms[1:]) - t1 * (len(ms) - 1)
            extra = f"  | draft step {ms[0] / t1:.2f}xT1, the 7 plain steps after it +{excess / t1:.2f}xT1"
        elif name.startswith("steady-"):
            extra = f"  | {ms[0] / t1:.2f}xT1"
        print(f"  {name:10s} {','.join(map(str, shape))[:22]:22s} {line}{extra}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": path.name, "threads": threads, "gpu_layers": args.gpu_layers, "graphs": graphs, "argmax": argmax,
                       "machine": platform.processor() or platform.machine(), "cycles": args.cycles,
                       "rounds": args.rounds, "patterns": shapes, "median_ms": medians}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
