"""scripts/measure/judge_split.py splits each step's judging into its parts, in every run (`none`
included): one row a step, a part nested in another timed inside it, and at a temperature alone a
peaked row's parts, not the whole row's; draft_split.py likewise a model-drafting step's draft time.
Run here on the fake target and draft (tests/support/fake_llm.py)."""

from __future__ import annotations

import pytest

from specllama.decoding.drafters import ModelDrafter
from specllama.decoding.engine import Engine, GenerationConfig
from specllama.decoding.sampling import SamplingParams
from tests.support.fake_llm import FakeContext
from tests.support.measure_scripts import fresh_scripts
from tests.support.peaked_rows import peaked


@pytest.fixture
def scripts(monkeypatch):
    yield from fresh_scripts(monkeypatch, "ask_split", "judge_split", "draft_split")


def test_every_step_of_a_plain_sampled_run_is_one_row_with_its_parts_nested(scripts, monkeypatch):
    ask_split, judge_split, _ = scripts
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


def test_every_drafting_step_is_one_row_with_its_parts_nested(scripts, monkeypatch):
    ask_split, _, draft_split = scripts
    ask_split.wrap_parts(monkeypatch.setattr, draft_split.PARTS, auto_only=False)
    config = GenerationConfig(drafter="model", k=3, max_tokens=12, sampling=SamplingParams(temperature=0.7, seed=1))
    list(Engine(FakeContext(peaked), {"model": ModelDrafter(FakeContext(peaked))}).generate([1, 2], config))

    steps = [parts for sent, parts in ask_split._steps if sent]
    assert steps
    for parts in steps:
        whole = parts["draft (ModelDrafter.propose, all of it)"]
        assert parts["  its decodes (_decode)"] + parts["  choosing the tokens (_choose)"] <= whole
        assert parts["    the row's weights (row_weights)"] <= parts["  choosing the tokens (_choose)"]
        assert "    a normalised row (probabilities; before)" not in parts  # the old way is gone
    assert len(ask_split.table(draft_split.PARTS)) == 2 + len(draft_split.PARTS)
