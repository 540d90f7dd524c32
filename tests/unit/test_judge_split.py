"""scripts/measure/judge_split.py splits each step's judging into its parts, in every run (`none`
included): one row a step, a part nested in another timed inside it, and at a temperature alone a
peaked row's parts, not the whole row's. Run here on the fake target (tests/support/fake_llm.py)."""

from __future__ import annotations

import numpy as np
import pytest

from specllama.decoding.engine import Engine, GenerationConfig
from specllama.decoding.sampling import SamplingParams
from tests.support.fake_llm import VOCAB, FakeContext
from tests.support.measure_scripts import fresh_scripts


@pytest.fixture
def scripts(monkeypatch):
    yield from fresh_scripts(monkeypatch, "ask_split", "judge_split")


def peaked(tokens):
    """Two likely next tokens, the rest of the vocabulary ~50 nats below: a real model's shape."""
    row = np.full(VOCAB, -50.0, dtype=np.float32)
    row[3 + len(tokens) % 5] = 5.0
    row[4 + len(tokens) % 7] = 4.0
    return row


def test_every_step_of_a_plain_sampled_run_is_one_row_with_its_parts_nested(scripts, monkeypatch):
    ask_split, judge_split = scripts
    ask_split.wrap_parts(monkeypatch.setattr, judge_split.PARTS, auto_only=False)
    config = GenerationConfig(drafter="none", k=0, max_tokens=12, sampling=SamplingParams(temperature=0.7, seed=1))
    list(Engine(FakeContext(peaked), None).generate([1, 2], config))

    steps = [parts for _, parts in ask_split._steps]
    assert len(steps) == 12
    for parts in steps:
        judge = parts["judge (engine._judge, all of it)"]
        sampling = parts["  rejection sampling (verify_sampling)"]
        assert sampling <= judge
        assert parts["    hot tokens (PeakedRow.of)"] + parts["    a draw from them (PeakedRow.draw)"] <= sampling
        assert "    the whole row (PeakedRow.whole)" not in parts  # the peaked way: no pass over the row
    lines = ask_split.table(judge_split.PARTS)
    assert lines[0].startswith("12 steps, 12 sent nothing")
    assert len(lines) == 2 + len(judge_split.PARTS)
