"""The suffix drafter calibrates on every proposal, sent or not: each is followed as the text goes on,
judged token by token against what the text committed until one differs or it is used up
(SuffixDrafter._judge_shadows), each token in its draft group (match class and position). Before, a
match-length class the calibrator started out doubting was never sent, so never judged, so never
trusted: after each edit in a file returned whole, -k auto waited for the match to reach 16 tokens;
and a proposal judged on its first token alone never taught what a copy's later tokens do."""

from __future__ import annotations

import numpy as np
import pytest

from specllama.decoding.cost.online import Prior, StepCosts
from specllama.decoding.drafters import DraftRequest
from specllama.decoding.engine import Engine, GenerationConfig, StepEvent
from specllama.decoding.outcome import StepOutcome
from specllama.decoding.suffix_drafter import SuffixDrafter
from specllama.decoding.suffix_groups import POSITION_CLASSES, draft_group
from tests.support import fake_llm

FILE = list(range(10, 60))  # 50 distinct tokens: every match is a single earlier occurrence
PROMPT = [2, *FILE, 3]
CONFIG = GenerationConfig(drafter="suffix", k="auto")


def propose(drafter: SuffixDrafter, committed: list[int], seq: int = 0):
    return drafter.propose([DraftRequest(seq, committed, 63, CONFIG, np.random.default_rng(0))])[0]


def judged(drafter: SuffixDrafter) -> int:
    return sum(sum(row) for row in drafter.calibrator.judged)


def judged_in(drafter: SuffixDrafter, group: int) -> int:
    return sum(drafter.calibrator.judged[group])


def test_proposals_never_sent_teach_their_groups_what_the_text_did():
    drafter = SuffixDrafter()
    committed = PROMPT + FILE[:3]  # the answer starts copying the file: a 3-token match
    first = propose(drafter, committed)
    group = draft_group(first.match_length, 0)
    assert first.tokens[0] == FILE[3] and first.confidence[0] == pytest.approx(0.75)  # the class's cold floor
    for t in FILE[3:8]:  # five plain steps, each committing the token the last proposal began with
        committed = committed + [t]
        propose(drafter, committed)
    # Each of the five proposals (matches of 3-7 tokens) is followed as far as the text went past it:
    # the first 5 tokens deep, the last 1: 15 tokens judged, by position 1st 5, 2nd 4, 3-4th 5, 5-8th 1.
    base = group - group % POSITION_CLASSES
    assert [judged_in(drafter, base + j) for j in range(5)] == [5, 4, 5, 1, 0]
    assert drafter.calibrator.predict(0.5, group) > 0.85  # 5 of 5 right: (4 x 0.75 + 5) / 9

    doubting = SuffixDrafter()
    committed = PROMPT + FILE[:3]
    propose(doubting, committed)
    propose(doubting, committed + [99])  # the text went elsewhere
    assert judged(doubting) == 1
    assert doubting.calibrator.predict(0.5, group) == pytest.approx(0.6)  # (4 x 0.75 + 0) / 5
    propose(doubting, committed + [99, FILE[4]])
    assert judged(doubting) == 1  # a proposal found wrong is followed no further


def test_a_copy_is_followed_past_what_was_sent_and_stops_at_its_first_wrong_token():
    drafter = SuffixDrafter()
    committed = PROMPT + FILE[:20]
    proposal = propose(drafter, committed)
    drafter.observe(0, StepOutcome(2, proposal.keep(2), 2, (1.0, 1.0), 0.1, 0.05, True))
    later = draft_group(proposal.match_length, 20)  # the copy's 21st token
    committed = committed + FILE[20:23] + [99] + FILE[24:44]  # the text copies 3 more, then edits one token
    propose(drafter, committed)
    assert judged_in(drafter, later) == 0  # it went wrong at the 4th token: never judged that far
    right = PROMPT + FILE[:60]
    other = SuffixDrafter()
    first = propose(other, right[:len(PROMPT) + 20])
    propose(other, right)  # forty tokens later, all as the first proposal said
    assert sum(other.calibrator.judged[draft_group(first.match_length, 20)]) >= 1


def test_tokens_verification_judged_are_not_judged_again():
    drafter = SuffixDrafter()
    committed = PROMPT + FILE[:20]
    proposal = propose(drafter, committed)
    sent = proposal.keep(2)
    drafter.observe(0, StepOutcome(2, sent, 2, (1.0, 1.0), 0.1, 0.05, True))
    assert judged(drafter) == 2
    propose(drafter, committed + FILE[20:23])  # the two accepted drafts and the target's own token
    assert judged(drafter) == 3  # only the third: the one verification did not judge

    rejected = SuffixDrafter()
    proposal = propose(rejected, committed)
    rejected.observe(0, StepOutcome(2, proposal.keep(2), 0, (0.0,), 0.1, 0.05, True))
    propose(rejected, committed + [99])
    assert judged(rejected) == 1  # past a rejected draft the proposal's later tokens say nothing


def test_a_new_text_on_the_slot_is_not_judged_against_the_last_ones_proposal():
    drafter = SuffixDrafter()
    propose(drafter, PROMPT + FILE[:20])
    other = [4, 5, 6, 7] * 20
    drafter.prefill(0, other)
    propose(drafter, other + [8])
    assert judged(drafter) == 0
    propose(drafter, PROMPT + FILE[:20])
    drafter.rollback(0, 10)  # a failed step cut the slot back: the proposal's text is gone
    propose(drafter, PROMPT[:10] + [99])
    assert judged(drafter) == 0


LEARNT = [1.00, 1.68, 2.36, 3.00, 3.64, 4.28, 5.17, 6.06, 6.94, 7.36, 7.77, 8.19, 8.60, 9.02, 9.43, 9.85]


def steep(rows: int) -> float:
    """T(n)/T(1) as learnt on the 2-core machine (scripts/measure/policy_replay.py), 0.6 a row past 16."""
    return LEARNT[rows - 1] if rows <= 16 else LEARNT[15] + 0.6 * (rows - 16)


def test_after_each_edit_in_a_file_returned_whole_drafting_resumes_before_the_match_is_16_long(monkeypatch):
    """The file comes back with one token changed every 50; on the 2-core machine's costs a draft pays
    only where acceptance is near-certain. Measured on this fake: 128 of 145 steps plain and 255 tokens
    accepted before (every edit waited 15 plain steps for a 16-token match), 66 of 99 and 301 with the
    last proposal judged, 28 of 70 and 330 with every proposal followed by draft position."""
    monkeypatch.setattr(fake_llm, "VOCAB", 1000)
    monkeypatch.setattr(fake_llm.FakeModel, "n_vocab", 1000)
    body = list(range(10, 410))
    prompt = [2, *body, 3]
    answer = [t if (i + 1) % 50 else 5 for i, t in enumerate(body)]

    def rule(tokens):
        row = np.zeros(1000, dtype=np.float32)
        at = len(tokens) - len(prompt)
        row[answer[at] if 0 <= at < len(answer) else fake_llm.EOG] = 5.0
        return row

    times = {}
    for mode in ("none", "suffix"):
        clock = fake_llm.FakeClock()
        target = fake_llm.FakeContext(rule, clock=clock, cost=lambda rows: 0.033 * steep(rows))
        engine = Engine(target, {"suffix": SuffixDrafter()}, {}, StepCosts(Prior(steep, 0.033, learned=True)), clock=clock)
        events = list(engine.generate(prompt, GenerationConfig(drafter=mode, k="auto", max_tokens=len(answer))))
        steps = [e for e in events if isinstance(e, StepEvent)]
        assert [e.summary.tokens for e in events[-1:]] == [len(answer)]
        times[mode] = clock.now
    plain_steps = sum(s.drafted == 0 for s in steps)
    assert plain_steps < 50, plain_steps
    assert sum(s.accepted for s in steps) > 310
    assert times["suffix"] < times["none"]
