#!/usr/bin/env python3
"""A machine's second session, replayed: the first session runs one recorded set from an empty cost cache
(policy_replay.py's fake target and virtual time), what its steps taught (StepCosts.snapshot, what the cost
cache keeps between sessions) becomes the prior of the second, which replays every other set; `auto`
against `none` per set, with the worst request.

Why: `bench` from a fresh cost cache measures a machine's first session only. On the 2-core AMD machine the
ten Xeon-blind prompts ran 0.92-1.00x from fresh caches and 0.99-1.03x with the costs earlier sessions had
learnt (bench/measured/vm-20261127-r3-unseen-learnt-*), so what a snapshot keeps decides what users see
from their second session on. --snapshot observed keeps each timed size's own samples where the first
session blended a size timed once with its estimate (`ratio(n)`), the variant weighed in
bench/measured/vm-20261127-policy-replay-stale-steps.md.

    python scripts/measure/second_session.py --first tuning --costs amd [--snapshot observed]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

import policy_replay  # noqa: E402

from specllama.decoding.cost import online  # noqa: E402

ANSWERS = HERE.parents[1] / "bench" / "measured" / "vm-20261126-greedy-answers"
SETS = ("heldout", "tuning", "similar", "copy", "unseen", "unseen2", "agentic", "agentic-heldout")
MEASURED = HERE.parents[1] / "bench" / "measured"


def use_costs(name: str) -> None:
    """The fake target's costs: this 2-core AMD machine's timed rows, the 2-vCPU Xeon's or the lent H200's curve."""
    if name == "amd":
        policy_replay.use_rows(MEASURED / "vm-20261126-verify-rows-dense.json")
    elif name == "xeon":
        policy_replay.use_curve(MEASURED / "xeon-20261126-heldout-t0.json")
    else:
        policy_replay.use_curve(MEASURED / "lent-20261127-r2-gpu-heldout-t0.json")
        policy_replay.PROPOSE_S, policy_replay.AFTERMATH = 0.13e-3, 0.93


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--first", default="tuning", choices=SETS, help="the set the first session runs (default %(default)s)")
    p.add_argument("--costs", default="amd", choices=("amd", "xeon", "h200"))
    p.add_argument("--snapshot", default="as-kept", choices=("as-kept", "observed"),
                   help="as-kept: StepCosts.snapshot; observed: each size's own samples, not blended")
    args = p.parse_args()
    use_costs(args.costs)
    made: list[online.StepCosts] = []

    def step_costs(*a, **k) -> online.StepCosts:
        made.append(online.StepCosts(*a, **k))
        return made[-1]

    policy_replay.StepCosts = step_costs
    load = lambda name: json.loads((ANSWERS / f"{name}.json").read_text())  # noqa: E731
    policy_replay.prompt_runs(load(args.first), ["auto"], fresh=True)
    first = made[-1]
    snapshot = first.snapshot()
    if args.snapshot == "observed":
        t1 = first.t1()
        snapshot["ratios"] = {str(n): 1.0 if n == 1 else first._observed_ratio(n, t1) for n in first.observed_rows()}
    prior = online.prior_from_snapshot(snapshot)
    policy_replay.StepCosts = lambda *a, **k: online.StepCosts(prior)  # the second session starts from it
    print(f"costs {args.costs}; first session {args.first}; snapshot ({args.snapshot}) T(n)/T(1): "
          + ", ".join(f"{n}: {r:.2f}" for n, r in sorted((int(n), r) for n, r in snapshot["ratios"].items())))
    print("| second session's set | auto vs none | worst request |\n|---|---|---|")
    for name in SETS:
        if name == args.first:
            continue
        rows = policy_replay.prompt_runs(load(name), ["none", "auto"], fresh=True)
        plain = {r["request"]: r["seconds"] for r in rows if r["mode"] == "none"}
        auto = [r for r in rows if r["mode"] == "auto"]
        total = sum(plain.values()) / sum(r["seconds"] for r in auto)
        worst = min(plain[r["request"]] / r["seconds"] for r in auto)
        print(f"| {name} | {total:.3f}x | {worst:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
