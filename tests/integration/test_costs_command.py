"""`specllama costs`: the break-even arithmetic and the command on a tiny model."""

from __future__ import annotations

import json

import pytest

from specllama.cli.main import main
from specllama.decoding.cost.curve import CostCurve
from specllama.decoding.cost.model import break_even_acceptance, expected_tokens_uniform


def test_break_even_acceptance_solves_the_cost_model():
    curve = CostCurve(0.05, [1.0, 1.4, 1.6, 1.96], 0.5, 256, 3)
    alpha = break_even_acceptance(curve.ratio, 2, 0.5)
    assert expected_tokens_uniform(2, alpha) == pytest.approx(2 * 0.5 + 1.6, rel=1e-6)
    assert break_even_acceptance(curve.ratio, 1, 0.9) is None  # 2 tokens for 2.3 decodes: never pays
    assert break_even_acceptance(curve.ratio, 3, 0.0) < break_even_acceptance(curve.ratio, 3, 0.5)


def test_costs_command_measures_once_then_reads_the_cache(tiny_models, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path))
    argv = ["costs", "--target", str(tiny_models["a"]), "--draft", str(tiny_models["b"]), "--ctx", "512"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "measuring this machine's decode costs" in err
    assert "T(n)/T(1)" in out and "draft model breaks even" in out and "suffix drafter breaks even" in out
    assert main(argv) == 0
    assert "measuring" not in capsys.readouterr().err
    assert main(argv + ["--json"]) == 0  # the same cached measurement, for scripts
    doc = json.loads(capsys.readouterr().out)
    assert doc["target"] == tiny_models["a"].name and doc["draft"] == tiny_models["b"].name
    assert doc["curve"]["t1_s"] > 0 and set(doc["break_even_acceptance"]) == {"model", "suffix"}
    assert set(doc["break_even_acceptance"]["suffix"]) == {str(k) for k in range(1, 7)}


def test_costs_command_prints_each_sources_bet(tiny_models, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path))
    argv = ["costs", "--target", str(tiny_models["a"]), "--draft", str(tiny_models["b"]), "--ctx", "512", "--json"]
    assert main(argv) == 0
    bets = {b["source"]: b for b in json.loads(capsys.readouterr().out)["source_bets"]}
    assert set(bets) == {"suffix", "grammar", "model"}  # the tiny target has no MTP heads
    assert bets["suffix"]["draft_cost"] == 0.0 and bets["model"]["draft_cost"] > 0
    # n = 1 on the measured curve: the same arithmetic as the break-even table.
    assert main(argv[:-1]) == 0
    out = capsys.readouterr().out
    assert "what each draft source bets" in out and "  suffix: drafting costs free" in out


def test_costs_shows_the_mtp_heads_learnt_cost_beside_the_draft_models(toy_models, tmp_path, monkeypatch, capsys):
    from specllama.runtime.cost_store import CostStore, save_learned

    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path))
    target = toy_models["qwen35"]
    store = CostStore(target, 1, 1, 0, False)
    save_learned(store.learned_key, {"t1_s": 0.01, "ratios": {str(n): 1 + 0.3 * (n - 1) for n in range(1, 17)},
                                     "draft_ratio": None}, None, 0.15)  # what a run that drafted with the head kept
    argv = ["costs", "--target", str(target), "--ctx", "512", "-t", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "MTP head c = 0.15 a draft position" in out and "  mtp: drafting costs 0.15 of a target step" in out
    assert main(argv + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["learnt"]["mtp_ratio"] == 0.15
    assert {b["source"]: b["draft_cost"] for b in doc["source_bets"]}["mtp"] == 0.15


def test_costs_shows_what_going_back_to_plain_decoding_costs_where_earlier_runs_measured_it(
        tiny_models, tmp_path, monkeypatch, capsys):
    from specllama.runtime.cost_store import CostStore, save_learned

    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path))
    target = tiny_models["a"]
    store = CostStore(target, 1, 1, 0, False)
    save_learned(store.learned_key, {"t1_s": 0.002, "ratios": {str(n): 1 + 0.1 * (n - 1) for n in range(1, 17)},
                                     "draft_ratio": None, "switch_ratio": 1.86})  # what a GPU run kept
    argv = ["costs", "--target", str(target), "--ctx", "512", "-t", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "going back to plain decoding after a draft +1.86 plain steps" in out
    assert "after plain steps n=1: never" in out
    assert main(argv + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["learnt"]["switch_ratio"] == 1.86
    assert doc["source_bets"][0]["break_even_after_plain"]["1"] == "never"


def test_a_curve_timed_with_the_draft_serves_a_session_without_it_and_the_other_way(
        tiny_models, tmp_path, monkeypatch, capsys):
    """`specllama costs` on a pair caches the target's curve for draftless sessions too (`--drafter
    auto` leaves an unpaying draft unloaded, and such a session looks its curve up without one); a
    curve timed without a draft primes a session with one, its draft's cost then from file sizes."""
    from specllama.runtime.cost_store import CostStore

    monkeypatch.setenv("SPECLLAMA_COSTS", str(tmp_path / "pair"))
    target, draft = tiny_models["a"], tiny_models["b"]
    assert main(["costs", "--target", str(target), "--draft", str(draft), "--ctx", "512", "-t", "1", "--json"]) == 0
    timed = json.loads(capsys.readouterr().out)["curve"]
    store = CostStore(target, 1, 1, 0, False)
    alone = store.curve(None)
    assert alone is not None and alone.ratios == timed["ratios"] and alone.draft_ratio is None
    assert store.curve(draft).draft_ratio == timed["draft_ratio"] > 0

    monkeypatch.setenv("SPECLLAMA_COSTS", str(tmp_path / "target"))
    assert main(["costs", "--target", str(target), "--ctx", "512", "-t", "1", "--json"]) == 0
    timed = json.loads(capsys.readouterr().out)["curve"]
    with_draft = store.curve(draft)
    assert with_draft.ratios == timed["ratios"] and with_draft.draft_ratio is None
    size_ratio = draft.stat().st_size / target.stat().st_size
    assert store.prior(draft).draft_ratio == pytest.approx(size_ratio)
    assert not store.draft_cost_known(draft)
