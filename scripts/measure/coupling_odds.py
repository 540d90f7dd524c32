"""How often a draft model's token would be the target's at a temperature under each way of judging it,
on the real pair's rows: what a draft model would keep if its drafts were judged like the suffix
drafter's (the target's own draw at each position, decoding/position_streams.py), against rejection
sampling's optimum.

Why: with a seed, suffix drafts now leave the sampled text as plain decoding writes it; a draft model's
sampled drafts do not (rejection sampling keeps the draft's token where the target's draw would have
been another). Coupling the two draws would make every drafter leave the text alone; what it costs is
the acceptance each coupling loses against the optimum, per position given the text so far:
  - rejection sampling (today): sum of min(p, q), the most any coupling can give;
  - one shared uniform through both rows' cumulative sums in token-id order (the draw PeakedRow makes);
  - shared Gumbel noise, the token with the largest log p + g against log q + g (order-free);
  - a greedy draft (the draft's argmax, judged as a suffix draft is now): p(argmax q).
Plain sampled answers by the target (`-n` tokens a prompt at `--temp`, `--seed`), every step's row kept;
the draft model's rows at the same positions from one decode of the prompt and the answer.

    python scripts/measure/coupling_odds.py --prompts bench/prompts_heldout.jsonl -n 64 --temp 0.7 --seed 7
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import sampled_answers  # noqa: E402

GUMBEL_DRAWS = 2000  # Monte Carlo draws a position for the Gumbel coupling
SUPPORT = 1e-7  # tokens below this probability in both rows are left out of the Gumbel draws


def softmax(logits: np.ndarray, temperature: float) -> np.ndarray:
    x = logits.astype(np.float64) / temperature
    x -= x.max()
    e = np.exp(x)
    return e / e.sum()


def by_id_order(p: np.ndarray, q: np.ndarray) -> float:
    """P(the same token) when one uniform is read through both rows' cumulative sums in id order."""
    cp, cq = np.cumsum(p), np.cumsum(q)
    low = np.maximum(np.concatenate(([0.0], cp[:-1])), np.concatenate(([0.0], cq[:-1])))
    return float(np.clip(np.minimum(cp, cq) - low, 0.0, None).sum())


def gumbel(p: np.ndarray, q: np.ndarray, rng: np.random.Generator) -> float:
    """P(the same argmax of log p + g and log q + g) over shared Gumbel noise g, by Monte Carlo."""
    keep = (p > SUPPORT) | (q > SUPPORT)
    lp, lq = np.log(np.maximum(p[keep], 1e-300)), np.log(np.maximum(q[keep], 1e-300))
    g = rng.gumbel(size=(GUMBEL_DRAWS, int(keep.sum())))
    return float(np.mean(np.argmax(lp + g, axis=1) == np.argmax(lq + g, axis=1)))


def main() -> int:
    args = sampled_answers.arguments(__doc__)
    pairs: list[tuple[np.ndarray, np.ndarray]] = []
    for runtime, prompt, answer, rows in sampled_answers.answers(args, load_draft=True):
        draft = runtime.draft_ctx
        draft.clear()
        text = prompt + answer
        # The draft's rows that scored each answer token, from one decode of the prompt and the answer.
        q_rows = draft.decode(text[:-1], logits=list(range(len(prompt) - 1, len(text) - 1)))
        draft.clear()
        pairs += list(zip(rows, q_rows))
        info = runtime.describe()
    rng = np.random.default_rng(1)
    optimum, id_order, shared_gumbel, greedy = [], [], [], []
    for t_logits, d_logits in pairs:
        pt, qd = softmax(t_logits, args.temp), softmax(d_logits, args.temp)
        optimum.append(float(np.minimum(pt, qd).sum()))
        id_order.append(by_id_order(pt, qd))
        shared_gumbel.append(gumbel(pt, qd, rng))
        greedy.append(float(pt[int(np.argmax(qd))]))
    print(f"{len(pairs)} positions: plain answers at --temp {args.temp} --seed {args.seed}, -n {args.n}, {args.prompts}; "
          f"target {info.target.file}, draft {info.draft.file if info.draft else '-'}")
    print("| judged by | a draft token kept: mean | median | share of the optimum |\n|---|---|---|---|")
    best = statistics.mean(optimum)
    for label, values in (("rejection sampling (today: the optimum, sum of min(p, q))", optimum),
                          ("one uniform through both rows in id order", id_order),
                          (f"shared Gumbel noise ({GUMBEL_DRAWS} draws a position)", shared_gumbel),
                          ("a greedy draft, judged by the target's draw: p(argmax q)", greedy)):
        print(f"| {label} | {statistics.mean(values):.3f} | {statistics.median(values):.3f} | "
              f"{statistics.mean(values) / best:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
