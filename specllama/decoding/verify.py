"""Deciding which draft tokens the target accepts. Pure numpy, no model calls.

Both verifiers return the accepted prefix length plus exactly one token from the target, so every
speculative step emits n_accepted + 1 tokens and the output is distributed exactly as if the target
had decoded alone (greedy: identical tokens; sampling: identical distribution).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from specllama.decoding.position_streams import PositionStreams
from specllama.decoding.sampling import sample
from specllama.decoding.target_rows import GivenProbabilities, TargetRows

# Draws from p a rejection tries before the whole residual (draw_residual): each is kept with the rows'
# total variation distance, on a rejected draft mostly a few tenths.
RESIDUAL_ATTEMPTS = 8


@dataclass(frozen=True)
class Verdict:
    n_accepted: int  # how many draft tokens were accepted (0..K)
    token: int  # the one token the target contributes after them
    bonus: bool  # True when all K were accepted and `token` came from the target's last row
    # Per judged draft (the accepted ones and the first rejection): the probability the target
    # accepted it with, given the drafts before it (1 or 0 when greedy; see outcome.StepOutcome).
    odds: tuple[float, ...] = field(default=(), compare=False)


def verify_greedy(draft: Sequence[int], target_logits: np.ndarray) -> Verdict:
    """target_logits: (K+1, vocab), row i scored after draft[:i], or (K+1,) the argmax ids of those
    rows (what the target context returns when only ids are asked for). Accept the longest prefix
    where draft[i] == argmax(target_logits[i]); the target then contributes the argmax of the first
    mismatching row, or of row K (the bonus) when all K were accepted. K = 0 is plain decoding.

    Ties: np.argmax returns the lowest token id among equal maxima, and so does llama.cpp's greedy
    sampler (a strict `>` scan in token-id order), so the runner matches llama.cpp token for token.
    """
    k = len(draft)
    ids = target_logits.ndim == 1
    if ids:
        if target_logits.shape[0] != k + 1:
            raise ValueError(f"target ids must have shape ({k + 1},) for this draft, got {target_logits.shape}")
    else:
        _check_rows(target_logits, k + 1, "target_logits")

    def choice(i: int) -> int:  # what the target would have decoded at row i
        return int(target_logits[i]) if ids else int(np.argmax(target_logits[i]))

    for i, proposed in enumerate(draft):
        chosen = choice(i)
        if chosen != proposed:  # first disagreement: keep the target's token and stop
            return Verdict(n_accepted=i, token=chosen, bonus=False, odds=(1.0,) * i + (0.0,))
    # All agreed: the last row's choice is a free token.
    return Verdict(n_accepted=k, token=choice(k), bonus=True, odds=(1.0,) * k)


def verify_sampling(draft: Sequence[int], q: np.ndarray | TargetRows | None, p: np.ndarray | TargetRows,
                    rng: np.random.Generator | PositionStreams, position: int = 0) -> Verdict:
    """Modified rejection sampling (Leviathan et al. 2023; Chen et al. 2023).

    p: (K+1, vocab) target probabilities, row i conditioned on draft[:i] (an array, or
       target_rows.TargetRows such as LazyProbabilities, which works out only the rows read).
    q: (K, vocab) draft probabilities after the same transform (an array, or TargetRows such as
       draft_rows.DraftRows, a sampling drafter's), or None when the proposals were
       deterministic (prompt lookup, greedy draft): q is then one-hot at each draft token, so a draft
       token is accepted with probability p[i, x] and a rejection resamples from p[i] without x.
    Only p[i, x] and q[i, x] are read on accepted rows; whole rows are touched only where we stop.
    rng: one generator for the whole step, or the request's PositionStreams, `position` being where
       draft[0] lies in the text: each row's draws then come from its position's own stream, and a
       deterministic draft is judged by the target's own draw there (position_streams.py).
    """
    k = len(draft)
    rows = p if isinstance(p, TargetRows) else GivenProbabilities(p)
    _check_rows(rows, k + 1, "p")
    if q is not None:
        _check_rows(q, k, "q")
    streams = rng if isinstance(rng, PositionStreams) else None
    if streams is not None and q is None:
        return _verify_by_draws(draft, rows, streams, position)

    def at(i: int) -> np.random.Generator:  # row i's draws: its position's stream, or the step's one generator
        return rng if streams is None else streams.at(position + i)
    drafted = None if q is None else q if isinstance(q, TargetRows) else GivenProbabilities(q)
    odds: list[float] = []
    for i, x in enumerate(draft):
        g = at(i)
        # Accept with probability min(1, p_x / q_x): when r * q_x < p_x, a product so q_x == 0 cannot
        # divide by zero. The bounds of p_x and q_x decide unless r * q_x may fall on either side of
        # p_x (rows.prob_range; a sampling drafter's rows likewise: draft_rows.py); then both exactly.
        r = g.random()
        q_low, q_high = (1.0, 1.0) if drafted is None else drafted.prob_range(i, x)
        low, high = rows.prob_range(i, x)
        if not (r * q_high < low or r * q_low >= high):
            low = high = rows.prob(i, x)
            if drafted is not None:
                q_low = q_high = drafted.prob(i, x)
        odds.append(min(1.0, high / q_low) if q_low > 0 else 1.0)
        if r * q_high < low:
            continue
        # Rejected: the corrected distribution is the part of p that q under-proposed, max(0, p - q).
        if drafted is None:  # p - one_hot(x), clipped at zero: p without x
            return Verdict(n_accepted=i, token=rows.draw(i, g, without=x), bonus=False, odds=tuple(odds))
        return Verdict(n_accepted=i, token=draw_residual(rows, drafted, i, g), bonus=False, odds=tuple(odds))
    # Every draft token survived: the target's last row gives one more token for free.
    return Verdict(n_accepted=k, token=rows.draw(k, at(k)), bonus=True, odds=tuple(odds))


def _verify_by_draws(draft: Sequence[int], rows: TargetRows, streams: PositionStreams, position: int) -> Verdict:
    """Deterministic drafts judged by the target's own draws: at each row the token plain decoding would
    draw from that position's stream; a draft token is accepted when it is that token (probability p(x),
    as rejection sampling accepts a one-hot draft), and on the first that is not, the drawn token is the
    target's (a draw from p other than x: the residual of a one-hot draft). Each verdict's odds are
    p(x) (its upper bound where the row settles it on bounds: within ~3e-4 on a real model's row)."""
    odds: list[float] = []
    for i, x in enumerate(draft):
        drawn = rows.draw(i, streams.at(position + i))
        odds.append(min(1.0, rows.prob_range(i, x)[1]))
        if drawn != x:
            return Verdict(n_accepted=i, token=drawn, bonus=False, odds=tuple(odds))
    k = len(draft)
    return Verdict(n_accepted=k, token=rows.draw(k, streams.at(position + k)), bonus=True, odds=tuple(odds))


def draw_residual(p: TargetRows, q: TargetRows, i: int, rng: np.random.Generator,
                  attempts: int = RESIDUAL_ATTEMPTS) -> int:
    """A token from max(0, p[i] - q[i]), renormalised: by rejection from p first, a token y drawn from
    p kept with probability (p(y) - q(y))+ / p(y), each decided on bounds of p(y) and q(y) unless they
    straddle it. Every kept y follows the residual exactly, so after `attempts` failures the whole
    rows' residual finishes the job without bias. Why: the residual's whole rows are two passes over
    152k floats each (~0.4 ms on the 2-core machine, a sampled draft model's every rejected step),
    where drawing from p's few hot tokens and reading two probabilities is a few microseconds; an
    attempt is kept with the two rows' total variation distance, which a rejection makes likely."""
    for _ in range(attempts):
        y = p.draw(i, rng)
        keep = 1.0 - rng.random()  # in (0, 1]: kept when q(y) < keep * p(y), i.e. with 1 - q(y) / p(y)
        p_low, p_high = p.prob_range(i, y)
        q_low, q_high = q.prob_range(i, y)
        if q_high < keep * p_low:
            return y
        if q_low >= keep * p_high:
            continue
        if q.prob(i, y) < keep * p.prob(i, y):
            return y
    residual = np.maximum(p[i].astype(np.float64) - q[i], 0.0)
    # p == q on this row (only reachable through rounding): the residual is empty, fall back to p.
    return sample(residual, rng) if residual.sum() > 0.0 else p.draw(i, rng)


def _check_rows(array: np.ndarray, rows: int, name: str) -> None:
    # A shape mismatch here is an engine bug, not a user mistake, hence ValueError.
    if array.ndim != 2 or array.shape[0] != rows:
        raise ValueError(f"{name} must have shape ({rows}, vocab) for this draft, got {array.shape}")
