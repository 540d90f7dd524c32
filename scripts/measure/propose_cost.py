"""What the suffix drafter's Python costs a step: wall time of its propose (index query, odds, following
its proposals) and observe, per proposal, replaying recorded answers through the engine as
policy_replay.py does (`auto`, the target faked: only the drafter's own work is timed).

Why: under -k auto the drafter proposes every step, drafting or not, so its time is paid on plain steps
too (a one-token step is ~35 ms on the 2-core machine).

    python scripts/measure/propose_cost.py bench/measured/vm-20261126-greedy-answers/agentic-heldout.json

Warm, this is what a step pays where the decode leaves the CPU's caches alone (a GPU). On a CPU the
decode streams the weights through them, and the same code ran ~4x slower inside a real run
(scripts/measure/ask_split.py): `--cold-mb 128` writes that much before each proposal and gives the
real run's figure (the 2-core AMD: 152 us a proposal replayed cold on unseen4's answers, 145-153 us
timed inside `specllama bench`; 39-44 us warm). Use it to price asking in policy_replay.py
(--propose-ms) for a CPU machine without a real run.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import policy_replay  # noqa: E402

from specllama.decoding.suffix_drafter import SuffixDrafter  # noqa: E402


def timed_runs(recorded: dict, rounds: int, cold_mb: int = 0) -> list[tuple[int, float, float]]:
    """(proposals, seconds proposing, seconds observing) per round. cold_mb: before each proposal,
    that many MB are written over, as a real decode streams the weights through the caches."""
    spent = {"propose": 0.0, "observe": 0.0, "n": 0}
    propose, observe = SuffixDrafter.propose, SuffixDrafter.observe
    weights = np.zeros(cold_mb << 20, dtype=np.uint8)

    def timed_propose(self, requests):
        if cold_mb:
            weights[::64] += 1  # every cache line of the buffer
        t = time.perf_counter()
        out = propose(self, requests)
        spent["propose"] += time.perf_counter() - t
        spent["n"] += 1
        return out

    def timed_observe(self, seq, outcome):
        t = time.perf_counter()
        observe(self, seq, outcome)
        spent["observe"] += time.perf_counter() - t

    SuffixDrafter.propose, SuffixDrafter.observe = timed_propose, timed_observe
    try:
        out = []
        for _ in range(rounds + 1):  # the first round warms up (imports, allocations) and is dropped
            spent.update(propose=0.0, observe=0.0, n=0)
            policy_replay.prompt_runs(recorded, ["auto"])
            out.append((spent["n"], spent["propose"], spent["observe"]))
        return out[1:]
    finally:
        SuffixDrafter.propose, SuffixDrafter.observe = propose, observe


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("replay", type=Path, help="answers recorded with policy_replay.py --record")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cold-mb", type=int, default=0,
                   help="write this many MB before each proposal, as a decode's weights empty the caches "
                        "(128 gave the 2-core AMD's real-run figure, 32 about 60 %% of it; 0: warm, ~4x faster)")
    args = p.parse_args()
    runs = timed_runs(json.loads(args.replay.read_text()), args.rounds, args.cold_mb)
    per = [(prop / n * 1e6, obs / n * 1e6) for n, prop, obs in runs]
    print(f"{platform.processor() or platform.machine()}, python {platform.python_version()}; {args.replay.name}: "
          f"{runs[0][0]} proposals a round, {args.rounds} rounds")
    print(f"propose {statistics.median(a for a, _ in per):.0f} us, observe {statistics.median(b for _, b in per):.0f} us "
          f"a proposal (medians; rounds: {', '.join(f'{a:.0f}/{b:.0f}' for a, b in per)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
