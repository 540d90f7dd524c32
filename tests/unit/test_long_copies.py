"""A near-certain copy (a file returned with a change) drafts as far as the costs say it pays on its
text's odds, past K_AUTO_MAX up to K_COPY_MAX; anything else stays within K_AUTO_MAX
(policy/free_drafts.py)."""

from __future__ import annotations

import numpy as np

from specllama.decoding.drafters import DraftRequest
from specllama.decoding.engine import GenerationConfig
from specllama.decoding.outcome import StepOutcome
from specllama.decoding.policy.free_drafts import CERTAIN_FLOOR, LIKELY_MAX, cut_free, long_enough
from specllama.decoding.proposal import Proposal
from specllama.decoding.request import K_AUTO_MAX, K_COPY_MAX
from specllama.decoding.suffix_drafter import SuffixDrafter


def slope(per_row: float):
    return lambda n: 1.0 + per_row * (n - 1) if n >= 1 else None


def copy(n: int, odds: float, certain: int) -> Proposal:
    return Proposal(list(range(100, 100 + n)), confidence=[odds] * n, source="suffix", certain=certain)


def sent(proposal: Proposal, ratio) -> int:
    return len(cut_free(long_enough(proposal), ratio).tokens)


def test_a_certain_copy_goes_long_where_batches_are_cheap():
    # Many cores or a GPU: a row costs 0.05 of a step; at 0.99 a token the copy pays far out.
    assert sent(copy(K_COPY_MAX, 0.99, K_COPY_MAX), slope(0.05)) > 2 * K_AUTO_MAX


def test_a_certain_copy_is_cut_where_batches_are_dear():
    # Two cores: a row costs ~0.3 of a step; 64 rows cost ~20 steps, which 0.95 a token never repays.
    n = sent(copy(K_COPY_MAX, 0.95, K_COPY_MAX), slope(0.3))
    assert CERTAIN_FLOOR <= n < 2 * K_AUTO_MAX  # at least the certain floor, and not the whole match


def test_an_uncertain_match_stays_within_k_auto_max():
    # Long, but not a near-certain copy (a short match, or a text whose copies failed) and not likely.
    assert sent(copy(K_COPY_MAX, 0.85, 0), slope(0.01)) == K_AUTO_MAX


def test_a_likely_match_goes_to_one_block_of_rows_as_far_as_it_stays_likely():
    # A copy resumed after an edit: its match short, its odds high. Up to 16 rows, no further.
    assert sent(copy(K_COPY_MAX, 0.99, 0), slope(0.01)) == LIKELY_MAX
    likely = Proposal(list(range(100, 163)), confidence=[0.97] * 11 + [0.8] * 52, source="suffix")
    assert sent(likely, slope(0.01)) == 11
    assert sent(copy(K_COPY_MAX, 0.99, 0), slope(5.0)) == 0  # and only where the costs say it pays


def test_a_certain_leads_first_tokens_are_sent_whatever_the_costs():
    assert sent(copy(K_COPY_MAX, 0.9, 5), slope(5.0)) == CERTAIN_FLOOR
    assert sent(copy(K_COPY_MAX, 0.9, 2), slope(5.0)) == 2


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


# T(n)/T(1) learnt on the 2-core machine (spinning threads), past 16 rows the block-shaped costs
# measured through our decode (scripts/measure/policy_replay.py: 16 rows 275 ms, 32 483, 64 772).
LEARNT = [1.00, 1.68, 2.36, 3.00, 3.64, 4.28, 5.17, 6.06, 6.94, 7.36, 7.77, 8.19, 8.60, 9.02, 9.43, 9.85]


def two_cores(n: int) -> float | None:
    if n < 1:
        return None
    if n <= 16:
        return LEARNT[n - 1]
    return LEARNT[15] * (275 + (772 - 275) * (n - 16) / 48) / 275


def a_copy_in_progress(drafter: SuffixDrafter, body: list[int], at: int) -> Proposal:
    """The drafter's proposal `at` tokens into an answer that returns `body` (the prompt) whole."""
    committed = [1, *body, 2, *body[:at]]
    proposal = drafter.propose([DraftRequest(0, committed, K_COPY_MAX, GenerationConfig(k="auto"),
                                             np.random.default_rng(0))])[0]
    return long_enough(proposal)


def test_a_copy_goes_as_far_as_its_texts_record_says_it_holds():
    """What once doubled a copy's reach after each copy accepted whole: the text's own record per
    match class and draft position (acceptance.TextRecord). On the 2-core costs a fresh 16+ token
    match at the class's 0.9 is sent only up to the certain floor; once this text's long matches
    have held (copies accepted whole, and followed on as the text went on), the cost model sends
    most of what matched; once they break, little again."""
    body = list(range(100, 300))
    drafter = SuffixDrafter()
    fresh = a_copy_in_progress(drafter, body, 20)
    assert fresh.certain == len(fresh.tokens) == K_COPY_MAX
    assert sent(fresh, two_cores) <= K_AUTO_MAX
    at = 20
    for _ in range(3):  # three copies of 15 accepted whole, the target's own token after each
        proposal = a_copy_in_progress(drafter, body, at)
        drafter.observe(0, StepOutcome(15, proposal.keep(15), 15, (1.0,) * 15, 0.3, 0.033, True))
        at += 16
    held = a_copy_in_progress(drafter, body, at)
    assert sent(held, two_cores) >= 31
    for _ in range(6):  # then copies that break after 2 tokens: the text edits every few lines
        drafter.observe(0, StepOutcome(8, held.keep(8), 2, (1.0, 1.0, 0.0), 0.3, 0.033, True))
    broken = a_copy_in_progress(drafter, body, at)
    assert sent(broken, two_cores) <= K_AUTO_MAX
    drafter.prefill(0, [1, *body, 2])  # the next request: a text of its own
    assert sent(a_copy_in_progress(drafter, body, 20), two_cores) <= K_AUTO_MAX


def test_past_one_block_a_copy_is_sent_in_whole_blocks():
    """Between two blocks of rows a verify batch costs about the small batches' line, not the line
    between the blocks that unseen counts are interpolated on (cost/model.BLOCK_ROWS): a copy
    longer than a block is sized to end one, where its rows cost least."""
    from specllama.decoding.cost.model import BLOCK_ROWS

    for available in (20, 40, K_COPY_MAX):
        n = sent(copy(available, 0.995, available), slope(0.05))
        assert n + 1 <= BLOCK_ROWS or (n + 1) % BLOCK_ROWS == 0, (available, n)
    assert sent(copy(40, 0.995, 40), slope(0.05)) == 2 * BLOCK_ROWS - 1  # as far as whole blocks reach
    assert sent(copy(12, 0.995, 12), slope(0.05)) == 12  # within one block, any length
