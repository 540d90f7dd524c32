"""The one home of the speculation cost model: expected tokens, what a step costs, the rate, and
the best draft lengths and number of sequences.

One step verifies, for every active sequence i, [last] + k_i drafts in one target decode. With
a_1..a_K the sequence's per-position acceptance (P(draft j accepted | drafts before it accepted)),
c_i its drafter's cost per draft token and T(n)/T(1) the cost of a decode of n rows in plain steps:

    E_i(k)  = 1 + a_1 + a_1*a_2 + ... + a_1*...*a_k          tokens kept (accepted drafts + the target's)
    rows(k) = k + 1                                          a causal batch; stairs verification differs
    rate    = sum_i E_i(k_i) / (sum_i k_i*c_i + T(sum_i rows(k_i))/T(1))

in tokens per plain step: plain decoding of one sequence is 1. With one sequence this is -k auto's
E(K) / (K*c + T(K+1)/T(1)); with K = 0 everywhere it is N / T(N), the gain of batching. The argmax
is taken over every length rather than "extend while the next token pays", because a cost curve
with steps (batch sizes that cost the same, then a jump) can make one more token a loss and three
more a gain; ties go to the shorter draft. The draft cost is charged as if each sequence drafted
alone, which overstates the model drafter's (it drafts all sequences in lockstep): a cautious
error, never one that drafts at a loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

Ratio = Callable[[int], "float | None"]  # n rows -> T(n)/T(1); None where unknown
Rows = Callable[[int], int]  # k drafts -> rows the target decodes to verify them


# llama.cpp's CPU kernels work on blocks of rows: a verify batch of a whole number of blocks costs
# less than its neighbours (timed at every n to 65 on this 2-core machine at a 500-token fill,
# bench/measured/vm-20261126-verify-rows-dense: T(n)/T(1) 7.7 at 16 rows against 11.2 at 15, 14.7 at
# 32 against 16.5 at 31, 20.7 at 64 against 26.5 at 63 and 30.7 at 60), while a count in between
# costs about a line drawn through the small batches, well above the straight line between two
# blocks that the learnt costs interpolate for counts never timed.
BLOCK_ROWS = 16


def causal_rows(k: int) -> int:
    """[last] + k drafts in one causal batch."""
    return k + 1


def expected_tokens(acceptance: Sequence[float]) -> list[float]:
    """E(0..K) for per-position acceptance a_1..a_K (chained)."""
    out, chain, total = [1.0], 1.0, 1.0
    for a in acceptance:
        chain *= min(1.0, max(0.0, a))
        total += chain
        out.append(total)
    return out


def expected_tokens_uniform(k: int, alpha: float) -> float:
    """E(k) when every position is accepted with probability alpha: (1 - alpha^(k+1)) / (1 - alpha)."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def step_cost(ratio: Ratio, k: int, draft_cost: float, rows: int | None = None) -> float | None:
    """One step in plain steps: k*c for the drafts plus T(rows)/T(1) for verifying them (rows
    defaults to a causal batch's k + 1). None when T(rows) is unknown. k = 0 costs 1."""
    r = ratio(rows if rows is not None else causal_rows(k))
    return None if r is None else k * draft_cost + r


def rate(expected: float, ratio: Ratio, k: int, draft_cost: float, rows: int | None = None) -> float | None:
    """Tokens per plain step for a step that keeps `expected` tokens: E / step_cost."""
    cost = step_cost(ratio, k, draft_cost, rows)
    return None if cost is None or cost <= 0 else expected / cost


def best_length(acceptance: Sequence[float], ratio: Ratio, draft_cost: float = 0.0, *,
                min_gain: float = 1.0, rows: Rows = causal_rows) -> int:
    """The k in 0..len(acceptance) with the best rate (k = 0: plain decoding, rate 1); a draft must
    promise at least `min_gain` times plain decoding's rate, else 0. Lengths whose cost is unknown
    are skipped."""
    if not acceptance:  # nothing to size (most steps' suffix proposal): plain decoding, no costs read
        return 0
    plain = 1.0 / (ratio(1) or 1.0)
    best_k, best = 0, plain
    for k, e in enumerate(expected_tokens(acceptance)):
        if k == 0:
            continue
        r = rate(e, ratio, k, draft_cost, rows(k))
        if r is not None and r > best + 1e-12:
            best_k, best = k, r
    return best_k if best >= plain * min_gain else 0


def whole_blocks(ratio: Ratio) -> Ratio:
    """`ratio` for batches of up to one block or of whole blocks, None (not considered) for the
    counts between: a long draft is sized to end a block, where the extra rows cost least. Why
    not trust the learnt costs between blocks: counts never timed are interpolated between those
    timed, and between two blocks' dips that line is 20-35 % below what they cost (BLOCK_ROWS); the
    counts a draft then chose were dear, and a dear count once timed is never chosen again, so the
    blocks stay the only cheap ones anyway. On a machine without such steps (a GPU's flat curve) a
    copy loses at most the part of a block it could not fill, taken by the next step (replayed on
    the lent H200's costs: the same time to 0.1 %)."""
    def blocks(n: int) -> float | None:
        return ratio(n) if n <= BLOCK_ROWS or n % BLOCK_ROWS == 0 else None
    return blocks


def best_possible_rate(ratio: Ratio, draft_cost: float, k_max: int, rows: Rows = causal_rows) -> float:
    """The rate at 100 % acceptance: at or below 1, this drafter can never pay on this machine."""
    rates = [r for k in range(1, k_max + 1) if (r := rate(k + 1, ratio, k, draft_cost, rows(k))) is not None]
    return max(rates, default=1.0)


@dataclass
class LengthChoice:
    """One sequence's say in a step's plan: its per-position acceptance estimates (empty: it does
    not draft this step), the cost of one draft token, the most drafts it may have."""

    acceptance: Sequence[float]
    draft_cost: float = 0.0
    cap: int = 0


def batch_rate(choices: Sequence[LengthChoice], ks: Sequence[int], ratio: Ratio,
               rows: Rows = causal_rows) -> float | None:
    """Expected tokens per plain step of one step with these draft lengths; None when the batch's
    cost is unknown."""
    r = ratio(sum(rows(k) for k in ks))
    if r is None:
        return None
    cost = r + sum(k * c.draft_cost for k, c in zip(ks, choices))
    return sum(expected_tokens(c.acceptance[:k])[-1] for k, c in zip(ks, choices)) / cost


def choose_lengths(choices: Sequence[LengthChoice], ratio: Ratio, *, max_rows: int | None = None,
                   rows: Rows = causal_rows, fixed: Sequence[int | None] | None = None) -> list[int]:
    """Draft lengths maximising the step's rate. Coordinate ascent: each sequence in turn takes its
    best length with the others fixed, twice over (a second pass rarely changes anything, a third
    never did in the tests). Ties go to the shorter draft. `max_rows` bounds the whole batch (exact
    mode); `fixed[i]`, when not None, is sequence i's length, not chosen."""
    fixed = list(fixed) if fixed is not None else [None] * len(choices)
    ks = [f or 0 for f in fixed]
    for _ in range(2):
        for i, choice in enumerate(choices):
            if fixed[i] is not None:
                continue
            best_k, best = 0, None
            for k in range(0, min(choice.cap, len(choice.acceptance)) + 1):
                trial = ks[:i] + [k] + ks[i + 1:]
                if max_rows is not None and sum(rows(t) for t in trial) > max_rows:
                    break
                r = batch_rate(choices, trial, ratio, rows)
                if r is not None and (best is None or r > best + 1e-12):
                    best_k, best = k, r
            ks[i] = best_k
    return ks


def fit_rows(ks: Sequence[int], limit: int | None, rows: Rows = causal_rows) -> list[int]:
    """Trim draft lengths, longest first, until the batch fits `limit` rows (exact mode)."""
    ks = list(ks)
    if limit is None:
        return ks
    while ks and sum(rows(k) for k in ks) > limit and max(ks) > 0:
        ks[ks.index(max(ks))] -= 1
    return ks


def choose_parallel(ratio: Ratio, most: int) -> int:
    """The number of sequences n <= most maximising n / T(n) with one token each (plain
    decoding): the batch size that makes the most tokens per second on this machine."""
    best_n, best = 1, 1.0
    for n in range(2, most + 1):
        r = ratio(n)
        if r is not None and n / r > best + 1e-12:
            best_n, best = n, n / r
    return best_n


def predicted_speedup(ratio: Ratio, k: int, alpha: float | None, draft_cost: float | None,
                      rows: int | None = None) -> float | None:
    """The model's speedup over plain decoding for draft length k at uniform acceptance alpha.
    None when it cannot be predicted (no acceptance, no draft cost, an unknown batch)."""
    if k <= 0:
        return 1.0
    if alpha is None or draft_cost is None:
        return None
    return rate(expected_tokens_uniform(k, alpha), ratio, k, draft_cost, rows)


def break_even_acceptance(ratio: Ratio, k: int, draft_cost: float) -> float | None:
    """The uniform acceptance at which k drafts a step match plain decoding; None when even 100 %
    acceptance loses (or the batch's cost is unknown)."""
    best = predicted_speedup(ratio, k, 1.0, draft_cost)
    if best is None or best <= 1.0:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(40):  # the rate grows with alpha: bisect
        mid = (lo + hi) / 2
        if predicted_speedup(ratio, k, mid, draft_cost) < 1.0:
            lo = mid
        else:
            hi = mid
    return hi
