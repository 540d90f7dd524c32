"""scripts/measure/ask_split.py splits each `auto` step's Python into its parts: every step gets one row,
a part nested in another is timed inside it, and the steps that sent a draft are told apart. Run here
on policy_replay.py's fake target (a copy the suffix drafter drafts, then text it cannot)."""

from __future__ import annotations

import pytest

from tests.support.measure_scripts import fresh_scripts, isolate_replay


@pytest.fixture
def scripts(monkeypatch):
    isolate_replay(monkeypatch)
    yield from fresh_scripts(monkeypatch, "ask_split", "policy_replay")


def test_every_auto_step_is_one_row_with_its_parts_nested(scripts, monkeypatch):
    ask_split, policy_replay = scripts
    ask_split.wrap_parts(monkeypatch.setattr)
    file = list(range(10, 60))
    answer = file[:30] + list(range(200, 230))  # a copy of the prompt, then new text
    rows = policy_replay.prompt_runs({"items": [{"id": "copy", "prompt": [2, *file, 3], "answer": answer}]}, ["auto"])

    steps = ask_split._steps
    drafting = [s for sent, s in steps if sent]
    run = rows[0]
    # a step emits its accepted drafts and one token of the target's own (the last one may end the answer)
    assert run["tokens"] - run["accepted"] <= len(steps) <= run["tokens"] - run["accepted"] + 1
    assert drafting and run["drafted"] >= len(drafting)
    assert len(steps) - len(drafting) > 0  # the new text: steps that sent nothing
    for _, parts in steps:
        ask = parts.get("ask (engine._draft, all of it)", 0.0)
        drafter = parts.get("  the suffix drafter (_propose_one)", 0.0)
        assert drafter <= ask  # timed inside it
        assert parts.get("    lookup (_longest)", 0.0) <= drafter
    assert any("    lookup (_longest)" in parts for _, parts in steps)
    lines = ask_split.table()
    assert lines[0].startswith(f"{len(steps)} steps, {len(steps) - len(drafting)} sent nothing")
    assert len(lines) == 2 + len(ask_split.PARTS)
