"""`specllama costs`: why speculation is (or is not) faster on this machine.

Times the startup curve (bare decodes of n rows, the draft's one-token decode) and prints it with,
for each draft length, the acceptance a drafter must reach to break even: E(K, a) = K*c + T(K+1)/T(1),
E the expected tokens per step; with --parallel, what decoding N prompts together gives: N tokens for
T(N). The engine plans with what its own steps cost (learnt as it runs, kept between runs); this
curve is only where that starts, so the learnt costs are printed beside it when there are any.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from typing import TYPE_CHECKING

from specllama.cli.arguments import add_model_options, add_status_options
from specllama.decoding.request import PARALLEL_AUTO_MAX, PARALLEL_MAX, drafter_name

if TYPE_CHECKING:  # the cost modules load llama.cpp: imported where used, so `--help` stays instant
    from specllama.decoding.cost.curve import CostCurve

K_SHOWN = 6

HELP = "this machine's measured costs: why speculation is or is not faster"
DESCRIPTION = """Measure (once, then cached) what a bare target decode of n tokens costs on this machine relative
to one token, T(n)/T(1), and print the acceptance rate each drafter needs to break even at each draft
length K, beside what earlier runs' own steps cost here (what `-k auto` starts from; it goes on
learning from every step). How these numbers drive `-k auto`: docs/how-it-works.md."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--remeasure", action="store_true", help="measure again even if a cached curve exists (default: off)")
    p.add_argument("--drafter", choices=("model", "suffix"), type=drafter_name, default="model",
                   help="the drafter whose break-even is shown with the suffix drafter's: model (default) or "
                        "suffix ('lookup' is an alias of suffix)")
    p.add_argument("--parallel", action="store_const", const="auto", default=1,
                   help=f"also measure large batches (to {PARALLEL_MAX} tokens) and show how many prompts to decode together "
                        "(default: off)")
    p.add_argument("--json", action="store_true", help="print the measurements as one JSON object (default: off)")
    add_model_options(p)
    add_status_options(p)


def break_even_table(curve: CostCurve) -> dict[str, dict[str, float | None]]:
    """drafter -> {K: the per-position acceptance it needs to match plain decoding, None: never}."""
    from specllama.decoding.cost.model import break_even_acceptance

    drafters = {"suffix": 0.0} | ({"model": curve.draft_ratio} if curve.draft_ratio is not None else {})
    return {name: {str(k): break_even_acceptance(curve.ratio, k, c) for k in range(1, K_SHOWN + 1)}
            for name, c in drafters.items()}


def describe(curve: CostCurve, draft_name: str | None) -> list[str]:
    lines = [f"target: one token takes {curve.t1_s * 1e3:.1f} ms ({1 / curve.t1_s:.1f} tok/s); "
             f"verifying n tokens in one batch costs T(n)/T(1):",
             "  " + "  ".join(f"n={n}: {r:.2f}" for n, r in enumerate(curve.ratios[:K_SHOWN + 1], start=1))]
    if curve.draft_ratio is not None:
        lines.append(f"draft {draft_name}: one token costs {curve.draft_ratio:.2f} of a target token")
    labels = {"model": "draft model", "suffix": "suffix drafter"}
    table = break_even_table(curve)
    for name in sorted(table, key=lambda n: n != "model"):  # the draft model first, as before
        needs = [f"K={k}: " + (f"{alpha:.0%}" if alpha is not None else "never") for k, alpha in table[name].items()]
        lines.append(f"{labels[name]} breaks even at per-position acceptance  " + "  ".join(needs))
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
    from specllama.decoding.cost.model import choose_parallel

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


def learnt_costs(runtime) -> dict | None:
    """What earlier runs' steps cost here, where the engine starts from; None: nothing learnt yet."""
    if not runtime.learned_costs():
        return None
    prior = runtime.costs.prior
    return {"t1_s": prior.t1_s, "ratios": {str(n): prior.ratio(n) for n in range(1, K_SHOWN + 2)},
            "draft_ratio": prior.draft_ratio, "mtp_ratio": runtime.learned_head_cost(), "switch_ratio": prior.switch}


def learnt_line(learnt: dict) -> str:
    ratios = "  ".join(f"n={n}: {r:.2f}" for n, r in learnt["ratios"].items())
    c = f"; draft c = {learnt['draft_ratio']:.2f}" if learnt["draft_ratio"] is not None else ""
    if learnt.get("mtp_ratio") is not None:
        c += f"; MTP head c = {learnt['mtp_ratio']:.2f} a draft position"
    if learnt.get("switch_ratio") is not None:
        c += f"; going back to plain decoding after a draft +{learnt['switch_ratio']:.2f} plain steps"
    return (f"what earlier runs' steps cost here (where the engine starts): T(1) {learnt['t1_s'] * 1e3:.1f} ms; "
            f"T(n)/T(1) {ratios}{c}")


def bets_for(runtime, curve: CostCurve, target_path, has_draft: bool) -> list:
    """Each source's bet on what this machine's decodes cost: the learnt costs where earlier runs
    taught some (the engine starts from them), else the startup curve."""
    from specllama.runtime.rollback_note import mtp_layers
    from specllama.runtime.source_bets import source_bets

    learnt = runtime.learned_costs()
    ratio = runtime.costs.ratio if learnt else curve.ratio
    draft_cost = (runtime.costs.draft_ratio() if learnt else None) or curve.draft_ratio
    return source_bets(ratio, draft_cost, has_draft=has_draft, mtp_cost=runtime.learned_head_cost(),
                       has_mtp=mtp_layers(target_path) > 0, switch=runtime.costs.switch_ratio())


def run(args: argparse.Namespace) -> int:
    from specllama.cli.options import resolved_for, status_lines  # the runtime loads llama.cpp: only when measuring
    from specllama.cli.progress import download_bar
    from specllama.decoding.cost.model import choose_parallel
    from specllama.llama import thread_wait
    from specllama.llama.machine import cpu_model
    from specllama.runtime.loaded import open_runtime
    from specllama.runtime.source_bets import bet_lines

    status = status_lines(args)
    resolved = resolved_for(args, status)
    opts = resolved.load  # costs decodes nothing: the target alone is measured alone, silently
    if args.parallel == "auto":
        opts = replace(opts, n_ctx=min(opts.n_ctx, 1024))  # costs only measures: keep 8 caches small
    with download_bar() as progress:
        runtime = open_runtime(opts, resolved.registry, progress=progress, status=status)
    with runtime:
        curve = runtime.startup_curve(args.remeasure, lambda: status.say(
            "measuring this machine's decode costs (10-60 s, once per machine, models and threads)..."))
        learnt = learnt_costs(runtime)
        info = runtime.describe()
        draft = info.draft.file if info.draft else None
        note = weight_note(info.target.path) if curve.max_n > K_SHOWN + 1 else None
        bets = bets_for(runtime, curve, info.target.path, has_draft=draft is not None)
        if args.json:
            print(json.dumps({
                "machine": {"cpu": cpu_model(), "threads": info.threads, "thread_wait": thread_wait.in_force()},
                "target": info.target.file,
                "draft": draft,
                "curve": curve.to_dict(),
                "break_even_acceptance": break_even_table(curve),
                "parallel_auto": choose_parallel(curve.ratio, PARALLEL_AUTO_MAX) if curve.max_n > K_SHOWN + 1 else None,
                "weights_note": note,
                "cache_file": str(runtime.cost_cache_file()),
                "learnt": learnt,
                "source_bets": [bet.to_dict() for bet in bets],
            }, indent=1))
            return 0
        print(f"machine: {cpu_model()}, {info.threads} threads ({thread_wait.in_force()} between ops: "
              f"--thread-wait); target {info.target.file}")
        for line in describe(curve, draft):
            print(line)
        if note:
            print(note)
        print(f"(bare decodes, cached in {runtime.cost_cache_file()}; --remeasure to measure again)")
        if learnt:
            print(learnt_line(learnt))
        for line in bet_lines(bets, runtime.costs.switch_ratio()):
            print(line)
    return 0
