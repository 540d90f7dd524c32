"""`specllama costs`: why speculation is (or is not) faster on this machine.

Times the startup curve (bare decodes of n rows, the draft's one-token decode) and prints it with,
for each draft length, the acceptance a drafter must reach to break even: E(K, a) = K*c + T(K+1)/T(1),
E the expected tokens per step; with --parallel, what decoding N prompts together gives: N tokens for
T(N). The engine plans with what its own steps cost (learnt as it runs, kept between runs); this
curve is only where that starts, so the learnt costs are printed beside it when there are any.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from specllama.cli.options import drafter_choice, load_options
from specllama.cli.progress import download_bar
from specllama.decoding.cost.curve import CostCurve
from specllama.decoding.cost.model import break_even_acceptance, choose_parallel
from specllama.decoding.request import PARALLEL_AUTO_MAX
from specllama.llama.machine import cpu_model
from specllama.runtime import Runtime

K_SHOWN = 6


def describe(curve: CostCurve, draft_name: str | None) -> list[str]:
    lines = [f"target: one token takes {curve.t1_s * 1e3:.1f} ms ({1 / curve.t1_s:.1f} tok/s); "
             f"verifying n tokens in one batch costs T(n)/T(1):",
             "  " + "  ".join(f"n={n}: {r:.2f}" for n, r in enumerate(curve.ratios[:K_SHOWN + 1], start=1))]
    drafters = [("suffix drafter", 0.0)]
    if curve.draft_ratio is not None:
        lines.append(f"draft {draft_name}: one token costs {curve.draft_ratio:.2f} of a target token")
        drafters.insert(0, ("draft model", curve.draft_ratio))
    for name, c in drafters:
        needs = []
        for k in range(1, K_SHOWN + 1):
            alpha = break_even_acceptance(curve.ratio, k, c)
            needs.append(f"K={k}: " + (f"{alpha:.0%}" if alpha is not None else "never"))
        lines.append(f"{name} breaks even at per-position acceptance  " + "  ".join(needs))
    if curve.max_n > K_SHOWN + 1:
        lines += batching_lines(curve)
    return lines


# Matrix types with a batched kernel on x86 CPUs in this llama.cpp: repacked GEMM (Q4_0, Q4_K,
# IQ4_NL) or llamafile's tinyBLAS (Q8_0, Q4_0, Q5_0). Others (Q6_K, Q5_K, ...) multiply row by row,
# so their cost grows with every sequence added. Measured here, 8 sequences against one of the
# same file: the registry's Q4_K_M (Q6_K output layer) 1.14x, a Q8_0 requantization 2.5x, pure
# Q4_0 1.8x.
BATCHED_X86 = {"Q4_0", "Q4_K", "IQ4_NL", "Q8_0", "Q5_0"}


def weight_note(path) -> str | None:
    """Which of the target file's matrix types multiply row by row on an x86 CPU, and what to do."""
    from specllama.llama.gguf_header import read_header

    counts: dict[str, int] = {}
    for t in read_header(path, decode_arrays=False).tensors:
        if len(t.shape) >= 2:
            counts[t.ggml_type.name] = counts.get(t.ggml_type.name, 0) + 1
    slow = {name: n for name, n in counts.items() if name not in BATCHED_X86 and name not in ("F32", "F16", "BF16")}
    mix = ", ".join(f"{name} x{n}" for name, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    if not slow:
        return f"target matrices: {mix}: every type has a batched kernel on x86"
    return (f"target matrices: {mix}; {', '.join(slow)} multiply row by row on x86 CPUs (cost grows with N): "
            "a Q8_0 or pure Q4_0 file batches better (`specllama models quantize NAME --type Q8_0`)")


def batching_lines(curve: CostCurve) -> list[str]:
    """What decoding several prompts together gives: N tokens for T(N), plain decoding each."""
    shown = [n for n in (1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 48, 64) if n <= curve.max_n]
    rates = {n: n / curve.ratio(n) / curve.t1_s for n in shown}
    best = choose_parallel(curve.ratio, PARALLEL_AUTO_MAX)
    lines = ["several prompts in one decode (batch --parallel N), plain decoding, predicted tokens/s in all:",
             "  " + "  ".join(f"N={n}: {rates[n]:.1f} ({rates[n] / rates[1]:.2f}x)" for n in shown),
             f"--parallel auto picks N = {best} (the best up to {PARALLEL_AUTO_MAX}: "
             f"{best / curve.ratio(best) / curve.t1_s:.1f} tok/s, {best / curve.ratio(best):.2f}x one prompt at a time)"]
    overall = choose_parallel(curve.ratio, curve.max_n)
    if overall > PARALLEL_AUTO_MAX:
        lines.append(f"  (N = {overall} would give {overall / curve.ratio(overall):.2f}x: pass --parallel {overall} "
                     "if memory allows, each prompt holds --ctx tokens of cache)")
    return lines


def cmd_costs(args: argparse.Namespace) -> int:
    # The drafters named explicitly: costs decodes nothing, so load_options' "decoding plainly"
    # note for --target without a draft would be wrong here (the target is measured alone).
    opts = load_options(args, drafters=(drafter_choice(args),))
    if args.parallel == "auto":
        opts = replace(opts, n_ctx=min(opts.n_ctx, 1024))  # costs only measures: keep 8 caches small
    with download_bar() as progress:
        runtime = Runtime(opts, progress=progress, status=lambda m: print(m, file=sys.stderr))
    with runtime:
        curve = runtime.measure_startup_curve(args.remeasure, lambda: print(
            "measuring this machine's decode costs (10-60 s, once per machine, models and threads)...", file=sys.stderr))
        print(f"machine: {cpu_model()}, {runtime.threads} threads; target {runtime.target_path.name}")
        for line in describe(curve, runtime.draft_path.name if runtime.draft_path else None):
            print(line)
        note = weight_note(runtime.target_path) if curve.max_n > K_SHOWN + 1 else None
        if note:
            print(note)
        print(f"(bare decodes, cached in {runtime.cost_cache_file()}; --remeasure to measure again)")
        learnt = runtime.costs.prior
        if runtime.learned_costs():
            ratios = "  ".join(f"n={n}: {learnt.ratio(n):.2f}" for n in range(1, K_SHOWN + 2))
            c = f"; draft c = {learnt.draft_ratio:.2f}" if learnt.draft_ratio is not None else ""
            print(f"what earlier runs' steps cost here (what the engine starts from): T(1) {learnt.t1_s * 1e3:.1f} ms; "
                  f"T(n)/T(1) {ratios}{c}")
    return 0
