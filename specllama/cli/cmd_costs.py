"""`specllama costs`: why speculation is (or is not) faster on this machine.

Prints the measured cost curve the -k auto chooser uses and, for each draft length, the acceptance
rate a drafter must reach to break even: E(K, a) = K*c + T(K+1)/T(1), E the expected tokens per step.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from specllama.cli.options import load_options
from specllama.cli.progress import download_bar
from specllama.decoding.cost_curve import CostCurve, break_even_acceptance
from specllama.decoding.runtime import Runtime
from specllama.llama.machine import cpu_model

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
            alpha = break_even_acceptance(curve, k, c)
            needs.append(f"K={k}: " + (f"{alpha:.0%}" if alpha is not None else "never"))
        lines.append(f"{name} breaks even at per-position acceptance  " + "  ".join(needs))
    return lines


def cmd_costs(args: argparse.Namespace) -> int:
    opts = replace(load_options(args), auto_k=True, remeasure_costs=args.remeasure)
    with download_bar() as progress:
        runtime = Runtime(opts, progress=progress, status=lambda m: print(m, file=sys.stderr))
    with runtime:
        curve = runtime.cost_curve
        print(f"machine: {cpu_model()}, {runtime.threads} threads; target {runtime.target_path.name}")
        for line in describe(curve, runtime.draft_path.name if runtime.draft_path else None):
            print(line)
        print(f"(measured at load and cached in {runtime.cost_cache_file()}; --remeasure to measure again)")
    return 0
