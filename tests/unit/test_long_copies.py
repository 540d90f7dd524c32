"""A near-certain copy (a file returned with a change) drafts as far as the costs say it pays, past
K_AUTO_MAX up to K_COPY_MAX; anything else stays within K_AUTO_MAX (policy/free_drafts.py)."""

from __future__ import annotations

from specllama.decoding.policy.free_drafts import CopyRun, cut_free, long_enough
from specllama.decoding.proposal import Proposal
from specllama.decoding.request import K_AUTO_MAX, K_COPY_MAX


def slope(per_row: float):
    return lambda n: 1.0 + per_row * (n - 1) if n >= 1 else None


def copy(n: int, odds: float, certain: int) -> Proposal:
    return Proposal(list(range(100, 100 + n)), confidence=[odds] * n, source="suffix", certain=certain)


def sent(proposal: Proposal, ratio, reach: int = K_AUTO_MAX) -> int:
    return len(cut_free(long_enough(proposal), ratio, reach=reach).tokens)


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


def test_a_prompt_bounds_what_rows_past_the_largest_batch_timed_cost():
    # Small batches timed dear (0.75 a row on 2 cores), a prompt decoded at 1/3 of a step a row:
    # a 65-row batch is priced from the prompt's row, not from the small batches' slope.
    from specllama.decoding.cost.online import VERIFY_ROW_FACTOR, StepCosts

    costs = StepCosts()
    for _ in range(5):
        costs.record_step(1, 0.040)
        costs.record_step(9, 0.040 * 7.0)
        costs.record_step(8, 0.040 * 6.25)
    steep = costs.ratio(65)
    costs.record_prefill(512, 512 * 0.040 / 3)
    bounded = costs.ratio(65)
    assert steep > 40  # the small batches' slope, 0.75 a row
    assert abs(bounded - (7.0 + VERIFY_ROW_FACTOR / 3 * 56)) < 0.5
    costs.record_prefill(8, 8 * 0.001)  # a short chunk says nothing of big batches
    assert abs(costs.ratio(65) - bounded) < 1e-9


def test_a_copy_accepted_whole_doubles_its_reach_and_a_rejection_halves_it():
    run = CopyRun()
    assert run.reach == K_AUTO_MAX
    run.observe(copy(8, 0.95, 8), n_accepted=8)
    assert run.reach == 15  # 16 rows with the token verified after the drafts: a whole block
    run.observe(copy(15, 0.95, 15), n_accepted=15)
    assert run.reach == 31
    run.observe(copy(31, 0.95, 31), n_accepted=31)
    assert run.reach == 63 == K_COPY_MAX
    run.observe(copy(63, 0.95, 63), n_accepted=63)
    assert run.reach == K_COPY_MAX
    run.observe(copy(8, 0.6, 0), n_accepted=8)  # an uncertain draft accepted: no evidence of a copy
    assert run.reach == K_COPY_MAX
    run.observe(copy(63, 0.95, 63), n_accepted=40)
    assert run.reach == 31
    for _ in range(4):
        run.observe(copy(8, 0.95, 8), n_accepted=2)
    assert run.reach == K_AUTO_MAX


def test_a_copy_grows_in_whole_blocks_of_rows():
    # Every reach a copy's doubling reaches, verified with the token after it, fills whole blocks
    # (a power of two rows), whatever length the accepted copy had.
    for first in range(1, K_COPY_MAX + 1):
        run = CopyRun()
        run.reach = first
        run.observe(copy(first, 0.95, first), n_accepted=first)
        rows = run.reach + 1
        assert run.reach == K_AUTO_MAX or rows & (rows - 1) == 0, (first, run.reach)
        assert run.reach >= min(first, K_COPY_MAX)  # never shrinks on a success


def test_the_reach_sends_a_certain_lead_the_costs_alone_would_cut():
    dear = slope(0.3)
    assert sent(copy(K_COPY_MAX, 0.95, K_COPY_MAX), dear) < 2 * K_AUTO_MAX
    assert sent(copy(K_COPY_MAX, 0.95, K_COPY_MAX), dear, reach=32) == 32
    assert sent(copy(20, 0.95, 20), dear, reach=32) == 20  # never past what matched
