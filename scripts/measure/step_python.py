#!/usr/bin/env python3
"""What a decoding step costs in Python, apart from llama.cpp: the real engine and drafters replay
recorded greedy answers on a fake target whose decodes cost nothing real (policy_replay.py's set-up,
virtual time for the decisions), and the wall time per step is what the engine itself spends:
planning, asking the drafters, verifying, committing, learning. `_draft` (asking the drafters for
proposals) is timed apart, since it is paid on every step that asks, also when nothing is sent.

Why it matters (issue 42): on 2 CPU cores a step is ~36 ms and this is noise; on the lent GPU a step is
~2 ms, and `auto` spent 11 % of its time asking (bench/measured/lent-20261126-gpu-heldout-t0).

Each mode is replayed --repeat times in this process; the minimum per step is reported (the machine is
shared: the least disturbed run is the closest to the code's own cost). Compare two commits by running
this file from each checkout in turn (`git worktree add /tmp/base COMMIT`, copy this file there).

    python scripts/measure/step_python.py --set heldout --modes none,auto --repeat 7

With --curve (a bench --json run's learnt costs, e.g. the lent GPU's) the engine decides as it would
there: where asking is dear it asks less often (realised.py's back-off), so the per-step figure is the
Python a step pays on that machine's decisions, measured on this one's CPU.

    python scripts/measure/step_python.py --curve bench/measured/lent-20261127-r2-gpu-heldout-t0.json \
        --propose-ms 0.13 --aftermath 0.93
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

import policy_replay  # noqa: E402

from specllama.decoding import engine as engine_module  # noqa: E402

ANSWERS = HERE.parents[1] / "bench" / "measured" / "vm-20261126-greedy-answers"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--set", default="heldout", help="recorded answers in %(default)s's folder: heldout, agentic, copy, ...")
    p.add_argument("--modes", default="none,auto")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--curve", type=Path, metavar="BENCH_JSON", help="decide on these learnt costs (policy_replay.py's)")
    p.add_argument("--propose-ms", type=float, default=0.0, help="with --curve: what an ask costs there, in virtual ms")
    p.add_argument("--aftermath", type=float, default=0.0, help="with --curve: policy_replay.py's --aftermath")
    args = p.parse_args()
    if args.curve:
        policy_replay.use_curve(args.curve)
        policy_replay.PROPOSE_S, policy_replay.AFTERMATH = args.propose_ms / 1000, args.aftermath
    recorded = json.loads((ANSWERS / f"{args.set}.json").read_text())
    timed = {"seconds": 0.0, "calls": 0, "asked": 0}
    draft = engine_module.Engine._draft

    def timed_draft(self, running, asks):
        start = time.perf_counter()
        try:
            return draft(self, running, asks)
        finally:
            timed["seconds"] += time.perf_counter() - start
            timed["calls"] += 1
            timed["asked"] += any(ask.drafts for ask in asks)

    engine_module.Engine._draft = timed_draft
    for mode in args.modes.split(","):
        step_us = ask_us = float("inf")
        for _ in range(args.repeat):
            timed.update(seconds=0.0, calls=0, asked=0)
            start = time.perf_counter()
            policy_replay.prompt_runs(recorded, [mode], fresh=True)
            steps = max(1, timed["calls"])
            step_us = min(step_us, (time.perf_counter() - start) / steps * 1e6)
            ask_us = min(ask_us, timed["seconds"] / steps * 1e6)
        print(f"{args.set} {mode}: {timed['calls']} steps, {timed['asked']} of them asked; per step, least of "
              f"{args.repeat}: whole {step_us:.0f} us, asking the drafters {ask_us:.0f} us", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
