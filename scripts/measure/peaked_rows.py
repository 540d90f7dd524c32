"""How peaked a real model's rows are, the fact decoding/target_rows.py's PeakedRow rests on: plain
sampled answers by the target, every step's logits row kept, and per temperature how many tokens of the
vocabulary are "hot" (within PeakedRow.COLD nats of the top after the temperature: the only ones a
plain sampled step works out), how many rows are not peaked (more than an eighth of the vocabulary hot:
the whole-row way) and the largest share the cold tokens' bound takes of a draw's proposal (how often a
draw goes the cold way, at most).

    python scripts/measure/peaked_rows.py --prompts bench/prompts_heldout.jsonl -n 64 --temp 0.7 --seed 7
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

TEMPERATURES = (0.3, 0.7, 1.0, 1.5)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompts", required=True, help="JSONL prompts, as bench reads them")
    p.add_argument("-n", type=int, default=64, help="tokens an answer (default %(default)s)")
    p.add_argument("--temp", type=float, default=0.7, help="the answers' own temperature (default %(default)s)")
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()

    from specllama.batch.prompts_file import read_prompts
    from specllama.decoding import target_rows
    from specllama.decoding.engine import GenerationConfig
    from specllama.decoding.sampling import SamplingParams
    from specllama.runtime.loaded import open_runtime
    from specllama.runtime.options import LoadOptions

    rows: list[np.ndarray] = []
    lazy_init = target_rows.LazyProbabilities.__init__

    def keeping(self, logits, params):  # every step's rows, as the engine judges them
        rows.extend(np.array(r, dtype=np.float32) for r in logits)
        lazy_init(self, logits, params)

    target_rows.LazyProbabilities.__init__ = keeping
    with open_runtime(LoadOptions(load_draft=False)) as runtime:
        for item in read_prompts(args.prompts).items:
            runtime.reset()
            config = GenerationConfig(max_tokens=args.n, drafter="none", k=0,
                                      sampling=SamplingParams(temperature=args.temp, seed=args.seed))
            list(runtime.generate(runtime.prompt_tokens(item.prompt, item.system), config))
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
