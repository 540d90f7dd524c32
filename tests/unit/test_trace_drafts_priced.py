"""scripts/measure/trace_drafts.py's lines (and policy_replay.py --trace, which prints them) say what each sent
draft's length was priced at when it was cut, beside what its step then cost. Why: a fresh engine's worst bets were
on batch sizes never timed (48 rows priced 7.5 plain steps, cost 22.5: bench/measured/vm-20261129-r15-extrapolation),
and the ratio printed after the step, already moved by its own sample, did not show it."""

from __future__ import annotations

import re

import pytest

from specllama.decoding.policy.source_choice import SourceChoice
from specllama.decoding.realised import RealisedSpeed
from tests.support.measure_scripts import fresh_scripts, isolate_replay


@pytest.fixture
def scripts(monkeypatch):
    isolate_replay(monkeypatch)
    for cls, name in ((SourceChoice, "observe"), (SourceChoice, "start"), (SourceChoice, "cut"), (RealisedSpeed, "_bench")):
        monkeypatch.setattr(cls, name, getattr(cls, name))  # wrap_observer replaces them: put back after the test
    yield from fresh_scripts(monkeypatch, "policy_replay", "trace_drafts")


def test_each_sent_draft_shows_the_price_its_length_was_cut_at(scripts, capsys):
    replay, trace = scripts
    trace.wrap_observer()
    file = list(range(10, 70))
    items = [{"id": "copy", "prompt": [2, *file, 3], "answer": file[:48]}]
    replay.prompt_runs({"items": items}, ["auto"], fresh=True)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("step")]
    assert lines, "a copy of the prompt drafts"
    for line in lines:
        m = re.search(r"T\((\d+)\)/T\(1\) ([\d.]+), priced ([\d.]+): ", line)
        assert m, line
        assert float(m.group(3)) >= 1.0
    # The first draft of a fresh engine is priced before any batch was timed; its step's sample then moves the
    # estimate, so the two figures on its line differ.
    first = re.search(r"T\(\d+\)/T\(1\) ([\d.]+), priced ([\d.]+)", lines[0])
    assert first.group(1) != first.group(2)
