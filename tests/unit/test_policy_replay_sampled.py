"""scripts/measure/policy_replay.py replays a sampled answer (recorded with --temp) as the real run would
learn from it: a draft is accepted where it equals the recorded token (the sampling verifier accepts a
deterministic draft d with p(d) and otherwise commits another token, so this is the real run's coupling),
and each judged draft is learnt at the target's tempered probability of that token there, not at the
replay's 1/0. Without the second part the replay of a sampled text learnt from coin flips where the real
engine learns the odds."""

from __future__ import annotations

import numpy as np
import pytest

from specllama.decoding.suffix_drafter import SuffixDrafter
from tests.support.measure_scripts import fresh_script, isolate_replay


@pytest.fixture
def policy_replay(monkeypatch):
    isolate_replay(monkeypatch)
    yield from fresh_script(monkeypatch, "policy_replay")


def tempered(logprobs, temperature=0.7):
    weights = np.exp(np.array(logprobs) / temperature)
    return weights / weights.sum()


def test_sampled_odds_are_each_recorded_tokens_tempered_probability(policy_replay):
    vocab = policy_replay.Vocabulary()
    odds = policy_replay.sampled_odds([[[7, -0.1], [9, -2.5]], [[9, -0.01]]], 0.7, vocab)
    p = tempered([-0.1, -2.5])
    assert odds == [{1: pytest.approx(p[0]), 2: pytest.approx(p[1])}, {2: pytest.approx(1.0)}]


def test_a_sampled_replay_learns_each_judged_draft_at_its_recorded_odds(policy_replay, monkeypatch):
    file = list(range(10, 40))
    prompt = [2, *file, 3]
    answer = file[:20]  # the answer copies the prompt: the suffix drafter drafts it
    # each recorded token at logprob -0.2 with one alternative at -1.0 (not in the text)
    tops = [[[t, -0.2], [t + 100, -1.0]] for t in answer]
    recorded = {"temperature": 0.7, "seed": 1, "items": [{"id": "copy", "prompt": prompt, "answer": answer, "top": tops}]}
    learnt = []
    original = SuffixDrafter.observe

    def observe(self, seq, outcome):
        learnt.extend(outcome.odds)
        return original(self, seq, outcome)

    monkeypatch.setattr(SuffixDrafter, "observe", observe)
    rows = policy_replay.prompt_runs(recorded, ["auto"])
    assert rows[0]["accepted"] > 0
    p = tempered([-0.2, -1.0])[0]  # 0.76: what the real verifier reports for an accepted copy token
    accepted = [odds for odds in learnt if odds > 0]
    assert accepted and all(odds == pytest.approx(p) for odds in accepted)
    # Greedy, the same text learns 1 for every accepted draft.
    learnt.clear()
    policy_replay.prompt_runs({"items": recorded["items"]}, ["auto"])
    assert learnt and set(learnt) <= {0.0, 1.0} and 1.0 in learnt


def test_a_curve_whose_last_point_dips_prices_bigger_batches_above_it(policy_replay, monkeypatch):
    """A learnt curve may end lower than the point before it (the lent H200's at --temp 0.7: 16 rows at 1.49
    plain steps, 15 at 5.12, the latter never timed). Extended past its end on that last slope, 64 rows cost
    less than nothing and the replay printed negative seconds; the average slope from one row keeps it rising."""
    monkeypatch.setattr(policy_replay, "ROWS_MS", {1: 2.0, 2: 3.0, 15: 10.0, 16: 3.0})
    assert policy_replay.ratio(16) == pytest.approx(1.5)
    assert policy_replay.ratio(64) > policy_replay.ratio(16) > 0
    monkeypatch.setattr(policy_replay, "ROWS_MS", {1: 2.0, 2: 3.0, 16: 10.0})
    assert policy_replay.ratio(30) == pytest.approx((10.0 + 14 * 7.0 / 14) / 2.0)  # a rising end: its own slope
