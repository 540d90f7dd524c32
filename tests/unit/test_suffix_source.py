"""The suffix drafter tells a match in what the text was given (its prompt, the session's earlier
texts) from a match in the text's own output so far, and calibrates each apart (suffix_groups.SOURCES):
a copy of a source goes on, a text repeating its own structure (a YAML list's keys) mostly does not.
Pure Python, no model."""

from __future__ import annotations

import numpy as np
import pytest

from specllama.decoding.drafters import DraftRequest
from specllama.decoding.engine import GenerationConfig
from specllama.decoding.policy.free_drafts import cut_free
from specllama.decoding.suffix_drafter import SuffixDrafter
from specllama.decoding.suffix_groups import COLD_FLOORS, draft_group, group_label
from specllama.decoding.suffix_index import SuffixIndex
from tests.support.fake_llm import judged

CONFIG = GenerationConfig(drafter="suffix", k="auto")
HALF = lambda n: 1 + 0.5 * (n - 1) if 1 <= n <= 64 else None  # noqa: E731  T(2)/T(1) = 1.5
PROMPT = [2, *range(10, 40), 3]  # 30 distinct tokens: a match in it is a single earlier occurrence


def propose(drafter: SuffixDrafter, committed: list[int], seq: int = 0):
    return drafter.propose([DraftRequest(seq, list(committed), 63, CONFIG, np.random.default_rng(0))])[0]


def test_a_match_says_where_its_path_goes_on():
    index = SuffixIndex()
    index.sync_live([5, 1, 2, 7, 8, 1, 2, 9, 6, 1, 2])
    match = index.query([5, 1, 2, 7, 8, 1, 2, 9, 6, 1, 2], 4)  # [1, 2] twice before: 7... and 9...
    assert match.length == 2 and match.tokens[0] in (7, 9)
    assert index.live_tokens[index.live_offset(match.at)] == match.tokens[0]
    lone = index.query([7, 8, 1], 3)
    assert lone.tokens == [2, 9, 6] and index.live_offset(lone.at) == 6
    index.add_document([40, 41, 42], "job")  # the live text becomes an earlier document
    index.sync_live([40, 41])
    earlier = index.query([40, 41], 1)
    assert earlier.tokens == [42] and index.live_offset(earlier.at) == -1


def test_a_match_in_the_prompt_and_one_in_the_texts_own_output_are_told_apart():
    drafter = SuffixDrafter()
    drafter.prefill(0, PROMPT)
    copy = propose(drafter, PROMPT + [10, 11, 12])  # the answer starts copying the prompt
    assert copy.tokens[:2] == (13, 14) and not copy.own
    drafter.prefill(1, PROMPT)
    output = [50, 51, 52, 53, 60, 50, 51, 52]  # the answer repeats its own first line
    own = propose(drafter, PROMPT + output, seq=1)
    assert own.tokens[:2] == (53, 60) and own.own
    assert own.match_length == copy.match_length == 3
    # The same raw evidence (a lone 3-token match), priced apart before anything was judged: the
    # prompt's class at its cold floor, the own output's at the raw bin's midpoint.
    assert copy.confidence[0] == pytest.approx(COLD_FLOORS[1])
    assert own.confidence[0] == pytest.approx(0.55)
    assert cut_free(copy, HALF).tokens and not cut_free(own, HALF).tokens


def test_each_source_learns_in_its_own_groups():
    drafter = SuffixDrafter()
    drafter.prefill(0, PROMPT)
    output = [50, 51, 52, 53, 60, 50, 51, 52]
    own = propose(drafter, PROMPT + output)
    drafter.observe(0, judged(own.keep(1), (0.0,)))  # its first token rejected
    mine, theirs = draft_group(3, 0, own=True), draft_group(3, 0)
    assert sum(drafter.calibrator.judged[mine]) == 1 and sum(drafter.calibrator.judged[theirs]) == 0
    # Followed as the text goes on (never sent): an own-output proposal the text went past teaches
    # the own group, not the prompt's.
    shadowed = SuffixDrafter()
    shadowed.prefill(0, PROMPT)
    propose(shadowed, PROMPT + output)
    propose(shadowed, PROMPT + output + [99])
    assert sum(shadowed.calibrator.judged[mine]) == 1 and sum(shadowed.calibrator.judged[theirs]) == 0


def test_the_next_turn_counts_the_last_answer_as_given():
    """A chat's next prompt holds the last answer: copying it again (an agent's file, edited once
    more) is a copy of what the text was given, not a repetition of its own output."""
    drafter = SuffixDrafter()
    drafter.prefill(0, PROMPT)
    answer = [50, 51, 52, 53, 54, 55]
    assert not propose(drafter, PROMPT + answer).own
    turn2 = PROMPT + answer + [4, 5]
    drafter.prefill(0, turn2)
    again = propose(drafter, turn2 + [50, 51, 52])
    assert again.tokens[:2] == (53, 54) and not again.own


def test_without_a_prefill_every_match_counts_as_given():
    """A slot the drafter was never told the prompt of (a direct caller): the old pricing."""
    drafter = SuffixDrafter()
    assert not propose(drafter, [50, 51, 52, 53, 60, 50, 51, 52]).own


def test_the_reports_name_the_source():
    assert group_label(draft_group(5, 0)) == "match 3-7, 1st token"
    assert group_label(draft_group(5, 0, own=True)) == "match 3-7 in its own output, 1st token"
    assert group_label(draft_group(40, 40, own=True)) == "match 16+ in its own output, 33rd+ token"
