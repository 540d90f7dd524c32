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
    args = p.parse_args()
    recorded = json.loads((ANSWERS / f"{args.set}.json").read_text())
    timed = {"seconds": 0.0, "calls": 0}
    draft = engine_module.Engine._draft

    def timed_draft(self, running, asks):
        start = time.perf_counter()
        try:
            return draft(self, running, asks)
        finally:
            timed["seconds"] += time.perf_counter() - start
            timed["calls"] += 1

    engine_module.Engine._draft = timed_draft
    for mode in args.modes.split(","):
        step_us = ask_us = float("inf")
        for _ in range(args.repeat):
            timed.update(seconds=0.0, calls=0)
            start = time.perf_counter()
            policy_replay.prompt_runs(recorded, [mode], fresh=True)
            steps = max(1, timed["calls"])
            step_us = min(step_us, (time.perf_counter() - start) / steps * 1e6)
            ask_us = min(ask_us, timed["seconds"] / steps * 1e6)
        print(f"{args.set} {mode}: {timed['calls']} steps; per step, least of {args.repeat}: "
              f"whole {step_us:.0f} us, asking the drafters {ask_us:.0f} us", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
