"""A serve run's own costs travel into its replay: scripts/measure/bench_serve.py keeps what each specllama
server learnt from its steps (read from the cost cache it saved on closing, before its scratch folder is
removed), and policy_replay.py --learnt prices the fake target's decodes with them. Why: a verify_rows.py
curve timed at another hour made the replay of a held-out sitting's texts draft 305 tokens where the real
server drafted 215 (its T(1) 31.9 ms against the sitting's 26 ms); on the sitting's own costs the replay
drafted what the server did within 15 % on every request."""

from __future__ import annotations

import pytest

from specllama.decoding.cost.online import StepCosts
from specllama.runtime import cost_store
from tests.support.measure_scripts import fresh_scripts, isolate_replay


@pytest.fixture
def scripts(monkeypatch):
    isolate_replay(monkeypatch)
    yield from fresh_scripts(monkeypatch, "bench_serve", "policy_replay")


def learnt_steps() -> StepCosts:
    costs = StepCosts()
    for _ in range(5):  # plain steps of 25 ms, batches of 4 and 16 rows at 3 and 6 of them
        costs.record_step(1, 0.025)
        costs.record_step(4, 0.075)
        costs.record_step(1, 0.025)
        costs.record_step(16, 0.150)
    return costs


def test_a_servers_learnt_costs_are_read_from_the_cache_it_saved(scripts, tmp_path, monkeypatch):
    bench_serve, _ = scripts
    folder = tmp_path / "costs"
    monkeypatch.setenv("SPECLLAMA_COSTS", str(folder))
    cost_store.save_learned({"target": "t.gguf", "threads": 2}, learnt_steps().snapshot())
    (folder / cost_store.DECISIONS_FILE).write_text("{}")  # the draft decisions beside it hold no costs

    learnt = bench_serve.learnt_costs(folder)

    assert learnt["t1_s"] == pytest.approx(0.025)
    assert {int(n): r for n, r in learnt["ratios"].items()} == {1: pytest.approx(1.0), 4: pytest.approx(3.0),
                                                                16: pytest.approx(6.0)}
    assert bench_serve.learnt_costs(tmp_path / "none-here") is None  # a server that never closed cleanly


def test_the_replay_prices_decodes_with_the_learnt_costs(scripts):
    _, policy_replay = scripts
    policy_replay.use_learnt({"t1_s": 0.025, "ratios": {"1": 1.0, "4": 3.0, "16": 6.0}}, "a sitting")

    assert policy_replay.T1 == pytest.approx(0.025)
    assert policy_replay.cost(1) == pytest.approx(0.025)
    assert policy_replay.cost(4) == pytest.approx(0.075)
    assert policy_replay.ratio(10) == pytest.approx(4.5)  # between the row counts the server timed
    assert policy_replay.cost(16) == pytest.approx(0.150)
