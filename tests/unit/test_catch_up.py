"""The draft model's catch-up, merged into its first draft decode or split one token a decode, chosen by
timing both (decoding/catch_up.py): on a fake CUDA backend whose graphs warm up as ggml-cuda.cu's do
(tests/support/fake_graphs.py) the trial keeps split, on a CPU-like one merged; the text never changes."""

from __future__ import annotations

import pytest

from specllama.decoding.catch_up import MERGED, SPLIT, CatchUpChoice
from specllama.decoding.engine import GenerationConfig
from tests.support.engines import alone
from tests.support.fake_graphs import model_drafted
from tests.support.fake_llm import noisy_rule

B, W = CatchUpChoice.BLOCK, CatchUpChoice.WARM


def trial(merged_s: float, split_s: float, positions: int = 2, one_s: float = 1e-3,
          twos: tuple[int, int] = (4, 4)) -> CatchUpChoice:
    """A trial whose steps after a two-token catch-up cost merged_s / split_s a position and the rest
    one_s either way; each block's first `twos[i]` counted steps are two-token ones."""
    choice = CatchUpChoice(trial=True)
    for (mode, seconds), two_token_steps in zip(((MERGED, merged_s), (SPLIT, split_s)), twos):
        for step in range(B):
            assert choice.chosen is None and choice.mode() == mode
            warm = step < W  # a block's first steps: their cost left out (here they cost 100x)
            two = W <= step < W + two_token_steps
            choice.record(mode, (seconds if two else one_s) * positions * (100 if warm else 1), positions, 1 + two)
    return choice


def test_a_trial_keeps_the_cheaper_way_a_draft_position_ties_to_merged_and_leaves_out_each_blocks_warm_up():
    assert trial(2.4e-3, 1.2e-3).chosen == SPLIT
    assert trial(1.0e-3, 1.6e-3).chosen == MERGED
    assert trial(1.0e-3, 0.97e-3, one_s=1.0e-3).chosen == MERGED  # within the margin: fewer decodes
    choice = trial(2.4e-3, 1.2e-3, one_s=1.2e-3)  # merged: 4 steps at 2.4 ms a position, 2 at 1.2
    assert choice.per_position(SPLIT) == pytest.approx(1.2e-3) and "1.20 ms split, 2.00 ms merged" in choice.describe()


def test_the_ways_are_compared_on_one_mix_of_catch_ups_not_on_what_each_block_happened_to_draw():
    """Whole drafts (two-token catch-ups) cost more a position either way; a merged block that drew
    few of them must not look cheaper than a split block that drew many (the 2-core machine's case)."""
    choice = trial(1.3e-3, 1.2e-3, one_s=1.0e-3, twos=(3, 6))
    # Per block, naively: merged (3 x 1.3 + 3 x 1.0) / 6 = 1.15, split (6 x 1.2) / 6 = 1.2: merged "wins".
    assert choice.chosen == SPLIT, choice.describe()
    assert choice.per_position(MERGED) > choice.per_position(SPLIT)


def test_a_block_goes_on_until_it_has_timed_whole_drafts_and_gives_up_at_its_longest():
    choice = CatchUpChoice(trial=True)
    for _ in range(B + 5):
        choice.record(MERGED, 1.0, 1, 1)  # only rejections: no two-token catch-up to time yet
    assert choice.mode() == MERGED
    for _ in range(CatchUpChoice.TWO_TOKEN_STEPS):
        choice.record(MERGED, 1.0, 1, 2)
    assert choice.mode() == SPLIT  # the merged block had what it needed
    for _ in range(CatchUpChoice.LONGEST):
        choice.record(SPLIT, 0.5, 1, 1)
    assert choice.chosen == MERGED and "too few" in choice.describe()


def run(graphs: bool, catch_up: CatchUpChoice, max_tokens: int = 160):
    """One greedy answer, model-drafted (k 3), the draft on a GraphedContext of 1 ms a replayed decode."""
    return model_drafted(catch_up, k=3, flip_every=7, max_tokens=max_tokens, graphs=graphs)


@pytest.mark.parametrize("graphs, kept", [(True, SPLIT), (False, MERGED)])
def test_on_fake_backends_the_trial_keeps_what_is_cheaper_there_and_the_text_is_the_targets(graphs, kept):
    config = GenerationConfig(drafter="model", k=3, max_tokens=160)
    ids, drafter, draft = run(graphs, CatchUpChoice(trial=True))
    assert ids == alone(config, [5, 6, 7], rule=noisy_rule(4, flip_every=7))
    assert drafter.catch_up.chosen == kept, drafter.catch_up.describe()
    merged, split = drafter.catch_up.per_position(MERGED), drafter.catch_up.per_position(SPLIT)
    if graphs:  # merged drafting's changing shapes keep its graph uncaptured: split replays
        assert split < CatchUpChoice.MARGIN * merged and draft.kinds["replayed"] > draft.kinds["uncaptured"]
    else:  # no graphs: the split catch-up is one decode more a step
        assert split > 1.1 * merged


def test_a_split_catch_up_is_priced_into_the_positions_it_serves_not_counted_as_one():
    """c (cost/online.py) is a draft position's cost: a split step of n positions reports n decodes
    and the seconds of all n + 1."""
    _, drafter, draft = run(True, CatchUpChoice(SPLIT), max_tokens=60)
    decodes, seconds = drafter.timing()
    one_token_decodes = sum(1 for rows in draft.batch_sizes[1:] if rows == 1)  # after the prompt's
    assert 0 < decodes < one_token_decodes and seconds > 0
