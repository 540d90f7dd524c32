"""How peaked a real model's rows are, the fact decoding/target_rows.py's PeakedRow rests on: plain
sampled answers by the target, every step's logits row kept, and per temperature how many tokens of the
vocabulary are "hot" (within PeakedRow.COLD nats of the top after the temperature: the only ones a
plain sampled step works out), how many rows are not peaked (more than an eighth of the vocabulary hot:
the whole-row way) and the largest share the cold tokens' bound takes of a draw's proposal (how often a
draw goes the cold way, at most).

    python scripts/measure/peaked_rows.py --prompts bench/prompts_heldout.jsonl -n 64 --temp 0.7 --seed 7
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import sampled_answers  # noqa: E402

TEMPERATURES = (0.3, 0.7, 1.0, 1.5)


def main() -> int:
    args = sampled_answers.arguments(__doc__)
    from specllama.decoding import target_rows

    rows: list[np.ndarray] = []
    for runtime, _, _, answer_rows in sampled_answers.answers(args):
        rows += answer_rows
        target = runtime.describe().target.file
    print(f"{len(rows)} rows of {rows[0].size} tokens: plain answers at --temp {args.temp} --seed {args.seed}, "
          f"-n {args.n}, {args.prompts}, target {target}")
    print("| temperature | hot tokens a row: median | 90th percentile | most | rows not peaked "
          "| cold share of a draw's proposal, most |")
    print("|---|---|---|---|---|---|")
    for temperature in TEMPERATURES:
        hot, flat, cold_share = [], 0, []
        for x in rows:
            row = target_rows.PeakedRow.of(x, temperature)
            if not isinstance(row, target_rows.PeakedRow):
                flat += 1
                continue
            hot.append(row.hot.size)
            cold_share.append(row.cold_mass / (row.hot_total + row.cold_mass))
        if hot:
            print(f"| {temperature} | {statistics.median(hot):.0f} | {np.percentile(hot, 90):.0f} | {max(hot)} | "
                  f"{flat} of {len(rows)} | {max(cold_share):.1e} |")
        else:
            print(f"| {temperature} | - | - | - | {flat} of {len(rows)} | - |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
