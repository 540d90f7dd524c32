#!/usr/bin/env python3
"""What the draft model's catch-up way costs a draft position on a fake CUDA backend (no GPU here):
the real engine and ModelDrafter, model-drafted greedy answers on fake contexts, the draft's decodes
charged as ggml-cuda.cu's graph warm-up charges them (tests/support/fake_graphs.py: uncaptured,
captured, replayed, per graph key), merged, split, and the trial's own choice (decoding/catch_up.py).

Why: the lent H100 and H200 learnt a draft decode of the 0.5B draft at 2.5-3.5 target steps (c in
bench/measured/lent-*-gpu-heldout-t0), 3.6 ms against llama-bench's 1.16 ms; the fix is measured
there (device_figures.sh shapes: decode_shapes.py on the draft; gpu: bench prints the trial's choice).
This shows the logic on the costs measured for the target there: uncaptured 1.49, captured 1.93 of
a replayed decode (bench/measured/lent-20261127-verify-shapes); --uncaptured/--captured try others
(the draft's own are not measured: its in-loop 3.6 ms over 1.16 suggests ~2.5 and ~3.3).

    python scripts/measure/catch_up_graphs.py [--uncaptured 1.49 --captured 1.93] [--cpu]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from specllama.decoding.catch_up import MERGED, SPLIT, CatchUpChoice  # noqa: E402
from tests.support.fake_graphs import CAPTURED, UNCAPTURED, model_drafted  # noqa: E402

UNIT_S = 1.16e-3  # llama-bench's one-token decode of the 0.5B draft on the H100 (../shared/device/README.md)


def answer(catch_up: CatchUpChoice, k: int, flip_every: int, args) -> tuple[float, int, CatchUpChoice]:
    """Draft seconds and draft positions over one 400-token answer; the drafter's catch-up choice."""
    _, drafter, _ = model_drafted(catch_up, k, flip_every, 400, graphs=not args.cpu, unit_s=UNIT_S,
                                  uncaptured=args.uncaptured, captured=args.captured)
    decodes, seconds = drafter.timing()
    return seconds, decodes, drafter.catch_up


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--uncaptured", type=float, default=UNCAPTURED)
    p.add_argument("--captured", type=float, default=CAPTURED)
    p.add_argument("--cpu", action="store_true", help="no graphs: every decode costs its rows alone")
    args = p.parse_args()
    backend = "no graphs (a CPU)" if args.cpu else f"CUDA graphs: uncaptured {args.uncaptured}, captured {args.captured}"
    print(f"fake draft backend, {backend}; a replayed one-token decode {UNIT_S * 1e3:.2f} ms; ms a draft position "
          "over a 400-token greedy answer (drafts of k, the target turning away every Nth token)")
    print(f"{'k':>2} {'N':>3} {'merged':>8} {'split':>8} {'trial':>8}  trial's choice")
    for k in (1, 2, 3, 4, 6):
        for flip_every in (3, 7, 50):
            ms = {}
            for name, choice in ((MERGED, CatchUpChoice(MERGED)), (SPLIT, CatchUpChoice(SPLIT)),
                                 ("trial", CatchUpChoice(trial=True))):
                seconds, positions, kept = answer(choice, k, flip_every, args)
                ms[name] = seconds / positions * 1e3
            print(f"{k:>2} {flip_every:>3} {ms[MERGED]:8.3f} {ms[SPLIT]:8.3f} {ms['trial']:8.3f}  {kept.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
