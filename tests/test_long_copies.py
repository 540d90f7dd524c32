"""A near-certain copy (a file returned with a change) drafts as far as the costs say it pays, past
K_AUTO_MAX up to K_COPY_MAX; anything else stays within K_AUTO_MAX (policy/free_drafts.py)."""

from __future__ import annotations

from specllama.decoding.policy.free_drafts import cut_free, long_enough
from specllama.decoding.proposal import Proposal
from specllama.decoding.request import K_AUTO_MAX, K_COPY_MAX


def slope(per_row: float):
    return lambda n: 1.0 + per_row * (n - 1) if n >= 1 else None


def copy(n: int, odds: float, certain: int) -> Proposal:
    return Proposal(list(range(100, 100 + n)), confidence=[odds] * n, source="suffix", certain=certain)


def sent(proposal: Proposal, ratio) -> int:
    long_enough(proposal)
    cut_free(proposal, ratio)
    return len(proposal.tokens)


def test_a_certain_copy_goes_long_where_batches_are_cheap():
    # Many cores or a GPU: a row costs 0.05 of a step; at 0.99 a token the copy pays far out.
    assert sent(copy(K_COPY_MAX, 0.99, K_COPY_MAX), slope(0.05)) > 2 * K_AUTO_MAX


def test_a_certain_copy_is_cut_where_batches_are_dear():
    # Two cores: a row costs ~0.3 of a step; 64 rows cost ~20 steps, which 0.95 a token never repays.
    n = sent(copy(K_COPY_MAX, 0.95, K_COPY_MAX), slope(0.3))
    assert K_AUTO_MAX <= n < 2 * K_AUTO_MAX  # the certain floor, and not the whole match


def test_an_uncertain_match_stays_within_k_auto_max():
    # Long, likely, but not a near-certain copy (a short match, or a text whose copies failed).
    assert sent(copy(K_COPY_MAX, 0.99, 0), slope(0.01)) == K_AUTO_MAX


def test_a_certain_lead_shorter_than_k_auto_max_is_still_sent_whatever_the_costs():
    assert sent(copy(K_COPY_MAX, 0.9, 5), slope(5.0)) == 5
