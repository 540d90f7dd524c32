"""How many sequences share a decode, and how many drafts each gets: the cost model for N and K.

One step decodes, for every active sequence i, [last] + k_i drafts in one batch. With E_i(k) the
expected tokens sequence i keeps (1 + a1 + a1*a2 + ...), c_i its drafter's cost per draft token
and T(n)/T(1) the machine's measured cost of a batch of n tokens, a step yields

    throughput = sum_i E_i(k_i) / (sum_i k_i*c_i + T(sum_i (k_i + 1)) / T(1))

tokens per one-token target decode. With N = 1 this is -k auto's E(K) / (K*c + T(K+1)/T(1)); with
K = 0 everywhere it is N / T(N), the gain of batching several prompts. The draft cost is charged
as if each sequence drafted alone, which overstates the model drafter's (it drafts all sequences
in lockstep, one batch per draft position): a cautious error, never one that drafts at a loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from specllama.decoding.draft_length import expected_tokens

Ratio = Callable[[int], "float | None"]  # n -> T(n)/T(1); None where not measured


@dataclass
class LengthChoice:
    """One sequence's say in the plan: its per-position acceptance estimates (empty: it does not
    draft this step), the cost of one draft token, the most drafts it may have."""

    acceptance: Sequence[float]
    draft_cost: float = 0.0
    cap: int = 0


def step_rate(choices: Sequence[LengthChoice], ks: Sequence[int], ratio: Ratio,
              batch_tokens: Callable[[int], int] = lambda k: k + 1) -> float | None:
    """Expected tokens per one-token decode for these draft lengths; None when the batch was
    never measured."""
    cost = ratio(sum(batch_tokens(k) for k in ks))
    if cost is None:
        return None
    cost += sum(k * c.draft_cost for k, c in zip(ks, choices))
    return sum(expected_tokens(c.acceptance[:k])[-1] for k, c in zip(ks, choices)) / cost


def choose_lengths(choices: Sequence[LengthChoice], ratio: Ratio, *, max_tokens: int | None = None,
                   batch_tokens: Callable[[int], int] = lambda k: k + 1,
                   fixed: Sequence[int | None] | None = None) -> list[int]:
    """Draft lengths maximising the step's throughput. Coordinate ascent: each sequence in turn
    takes its best length with the others fixed, twice over (a second pass rarely changes
    anything, a third never did in the tests). Ties go to the shorter draft. `max_tokens` bounds
    the whole batch (exact mode); `fixed[i]`, when not None, is sequence i's length, not chosen."""
    fixed = list(fixed) if fixed is not None else [None] * len(choices)
    ks = [f or 0 for f in fixed]
    for _ in range(2):
        for i, choice in enumerate(choices):
            if fixed[i] is not None:
                continue
            best_k, best = 0, None
            for k in range(0, min(choice.cap, len(choice.acceptance)) + 1):
                trial = ks[:i] + [k] + ks[i + 1:]
                if max_tokens is not None and sum(batch_tokens(t) for t in trial) > max_tokens:
                    break
                rate = step_rate(choices, trial, ratio, batch_tokens)
                if rate is not None and (best is None or rate > best + 1e-12):
                    best_k, best = k, rate
            ks[i] = best_k
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
