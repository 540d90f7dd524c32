"""`specllama bench`: config parsing, the cost model, and the JSON document on tiny models.

The tiny target drafts for itself ("a" as target and draft): greedy acceptance is then 100 % and
every speculative output must equal plain decoding token for token, which is what we assert.
"""

from __future__ import annotations

import json
import math

import pytest

from specllama.batch.prompts_file import read_prompts
from specllama.bench.aggregate import _speedup_from_steps, geomean
from specllama.bench.benchmark import BenchOptions, bench_prompts, run_benchmark
from specllama.bench.configs import BenchConfigError, parse_config, parse_configs
from specllama.bench.pairing import judge_runs, judge_sampled
from specllama.bench.runner import BenchPrompt, BenchRunner, RunRecord
from specllama.cli.main import main
from specllama.decoding.cost.curve import CostCurve, measure_cost_curve
from specllama.decoding.cost.model import expected_tokens_uniform, predicted_speedup
from specllama.decoding.engine import Summary
from specllama.decoding.sampling import SamplingParams
from specllama.runtime import LoadOptions, open_runtime

# --- configs --------------------------------------------------------------------------------


def test_configs_parse_into_canonical_labels_with_the_baseline_first():
    configs = parse_configs("model:k=2; lookup:k=3 ;model:k=4,verify=stairs;none;model:p_min=0.3;auto:k=auto")
    assert [c.label for c in configs] == ["none", "model:k=2", "suffix:k=3", "model:k=4,verify=stairs",
                                          "model:k=auto,p_min=0.3", "auto:k=auto"]  # lookup is read as suffix
    assert parse_configs("model:k=3")[0].is_baseline  # none added when missing
    assert parse_config("suffix:k=auto").k == "auto" and parse_config("suffix:k=auto").label == "suffix:k=auto"
    stairs = parse_config("model:k=4,verify=stairs")
    assert (stairs.drafter, stairs.k, stairs.verify) == ("model", 4, "stairs")


@pytest.mark.parametrize("text, fragment", [
    ("modle:k=2", "unknown drafter 'modle'"),
    ("model:k=two", "k must be a whole number"),
    ("model:k=0", "that is the 'none' configuration"),
    ("model:k=17", "k must be 'auto' or a whole number from 0 to 16, got 17"),
    ("lookup:k=automatic", "k must be a whole number"),
    ("model:q=1", "unknown option q"),
    ("model:k", "expected OPTION=VALUE"),
    ("model:verify=diagonal", "verify must be one of"),
    ("none:k=2", "'none' takes no options"),
    ("model:k=2;model:k=2", "more than once"),
    ("", "empty"),
])
def test_bad_configs_are_one_clear_error(text, fragment):
    with pytest.raises(BenchConfigError, match=fragment):
        parse_configs(text)


# --- the cost model ---------------------------------------------------------------------------

CURVE = CostCurve(t1_s=0.077, ratios=[1, 1.41, 1.61, 1.53, 1.94, 2.2, 2.5, 2.83], draft_ratio=0.57, n_past=256, reps=3)


def test_predicted_speedup_matches_design_notes_arithmetic():
    # The 2-core development machine's numbers (draft/target cost c 0.57, T(5)/T(1) 1.94) at
    # alpha 0.9, K 4 -> E / (K*c + T(K+1)/T(1)), the formula in specllama/decoding/cost/model.py
    e = (1 - 0.9 ** 5) / (1 - 0.9)
    c = CURVE.draft_ratio
    assert expected_tokens_uniform(4, 0.9) == pytest.approx(e)
    assert predicted_speedup(CURVE.ratio, 4, 0.9, c) == pytest.approx(e / (4 * 0.57 + 1.94))
    assert expected_tokens_uniform(3, 1.0) == 4  # no division by zero at full acceptance
    assert predicted_speedup(CURVE.ratio, 3, 0.8, 0.0) == pytest.approx(expected_tokens_uniform(3, 0.8) / 1.53)
    assert predicted_speedup(CURVE.ratio, 0, None, c) == 1.0  # plain decoding
    assert predicted_speedup(CURVE.ratio, 4, None, c) is None  # nothing measured
    assert predicted_speedup(CURVE.ratio, 8, 0.9, c) is None  # T(9) was not measured
    assert predicted_speedup(CURVE.ratio, 2, 0.5, c, rows=6) == pytest.approx(1.75 / (2 * 0.57 + 2.2))


def test_prediction_from_steps_sees_steps_with_fewer_drafts():
    # 10 steps: 6 with 3 drafts (all accepted), 4 with none (a lookup that found nothing).
    s = Summary(steps=10, drafted=18, accepted=18, drafted_at=[6, 6, 6], accepted_at=[6, 6, 6])
    tokens_per_step = (18 + 10) / 10
    cost = 6 * (3 * 0.0 + 1.53) + 4 * (0 + 1.0)
    assert _speedup_from_steps(CURVE, s, 0.0, verify="causal") == pytest.approx(tokens_per_step * 10 / cost)
    # When every step drafts K, it is the formula with the measured tokens per step.
    full = Summary(steps=5, drafted=10, accepted=5, drafted_at=[5, 5], accepted_at=[3, 2])
    assert _speedup_from_steps(CURVE, full, None, verify="causal") == pytest.approx(
        full.mean_accepted / (2 * 0.57 + 1.61))


def test_geomean():
    assert geomean([0.5, 2.0]) == pytest.approx(1.0)
    assert geomean([]) is None


# --- on tiny models -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runtime(tiny_models):
    rt = open_runtime(LoadOptions(target=str(tiny_models["a"]), draft=str(tiny_models["a"]), n_ctx=512, verifiers=("stairs",)))
    yield rt
    rt.close()


def test_cost_curve_is_measured_relative_to_one_token(runtime):
    curve = measure_cost_curve(runtime.target_ctx, runtime.draft_ctx, max_n=6, reps=2, n_past=64)
    assert curve.ratios[0] == 1.0 and len(curve.ratios) == 6
    assert all(r > 0 for r in curve.ratios) and curve.t1_s > 0
    assert curve.draft_ratio is not None and curve.draft_ratio > 0
    assert runtime.target_ctx.n_past == 0 and runtime.draft_ctx.n_past == 0  # left clean for the engine


def test_a_config_the_engine_cannot_run_is_reported_and_the_rest_go_on(tiny_models, tmp_path):
    rt = open_runtime(LoadOptions(target=str(tiny_models["a"]), draft=str(tiny_models["a"]), n_ctx=512))  # causal only
    try:
        prompts = bench_prompts(rt, read_prompts(_prompts_file(tmp_path)).items[:1])
        outcome = run_benchmark(rt, prompts, parse_configs("none;model:k=2;model:k=2,verify=stairs"),
                                BenchOptions(max_tokens=6, cost_curve_max_n=4))
    finally:
        rt.close()
    by_config = {s.config: s for s in outcome.summaries}
    assert by_config["model:k=2,verify=stairs"].failed and by_config["model:k=2,verify=stairs"].runs == 0
    assert by_config["model:k=2"].failed is None and by_config["model:k=2"].runs == 1


def test_a_diverging_output_is_caught(runtime):
    prompt = runtime.chat_tokens([{"role": "user", "content": "hello"}])
    baseline, config = parse_configs("none;model:k=2")
    _, ids = _generate(runtime, prompt, 8)
    tampered = ids[:3] + [(ids[3] + 1) % runtime.describe().target.n_vocab] + ids[4:]
    runs = [RunRecord(baseline, "p", 0, Summary(), ids), RunRecord(config, "p", 0, Summary(), ids),
            RunRecord(config, "p", 0, Summary(), tampered)]
    verdicts = judge_runs(runtime, {"p": prompt}, runs)
    assert [v.verdict for v in verdicts[:2]] == ["identical", "identical"]
    assert verdicts[2].position == 3 and verdicts[2].verdict in ("different", "near_tie")


def test_a_sampled_run_that_parts_from_plain_decoding_says_where():
    baseline, config = parse_configs("none;suffix:k=2")
    runs = [RunRecord(baseline, "p", 0, Summary(), [4, 5, 6, 7]), RunRecord(config, "p", 0, Summary(), [4, 5, 6, 7]),
            RunRecord(config, "p", 1, Summary(), [4, 5, 9, 7]), RunRecord(config, "q", 0, Summary(), [1])]
    verdicts = judge_sampled(runs)
    assert [v.verdict for v in verdicts[:3]] == ["identical", "identical", "parted"]
    assert verdicts[2].position == 2 and verdicts[3] is None  # no plain run of prompt q to compare with


def _generate(runtime, prompt, n):
    from specllama.decoding.engine import GenerationConfig
    runtime.reset()
    tokens, summary = runtime.generate(prompt, GenerationConfig(max_tokens=n, drafter="none")).tokens()
    runtime.reset()
    return summary, [e.id for e in tokens]


def _prompts_file(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join(json.dumps(p, ensure_ascii=False) for p in [
        {"id": "code", "prompt": "Write a Python function that reverses a string."},
        {"id": "emoji", "prompt": "Réponds en français 🙂: quelle heure est-il ?"},
    ]) + "\n", encoding="utf-8")
    return path


def test_bench_json_schema(tiny_models, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path / "cache"))  # k=auto caches its cost curve there
    out_json, out_md = tmp_path / "bench.json", tmp_path / "bench.md"
    code = main(["bench", "--prompts", str(_prompts_file(tmp_path)), "--target", str(tiny_models["a"]),
                 "--draft", str(tiny_models["a"]), "--ctx", "512", "--max-tokens", "10", "--repeat", "2",
                 "--configs", "none;model:k=2;suffix:k=3;model:k=3,verify=stairs;model:k=auto;auto:k=auto",
                 "--json", str(out_json), "--markdown", str(out_md)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "model:k=2" in out and "T(n)/T(1)" in out
    doc = json.loads(out_json.read_text())

    assert doc["schema"] == "specllama.bench/1"
    assert {"cpu", "cores", "threads", "llama_cpp_python", "peak_rss_bytes"} <= doc["machine"].keys()
    assert doc["machine"]["llama_cpp_python"] == "0.3.36" and doc["machine"]["peak_rss_bytes"] > 0
    # This build has no GPU backend: every layer on the CPU, and the record says so.
    assert doc["machine"]["placement"] == "CPU" and doc["machine"]["gpu_layers"] == 0
    assert doc["machine"]["flash_attn"] == "auto"  # a 512-token context: llama.cpp's own choice (llama/attention.py)
    assert "models on CPU" in out_md.read_text()
    assert doc["models"]["target"]["file"] == "a.gguf" and doc["models"]["draft"]["file"] == "a.gguf"
    curve = doc["cost_curve"]
    assert len(curve["ratios"]) == 16 and curve["ratios"][0] == 1.0 and curve["draft_ratio"] > 0
    assert doc["settings"]["repeat"] == 2 and doc["settings"]["max_tokens"] == 10

    labels = ["none", "model:k=2", "suffix:k=3", "model:k=3,verify=stairs", "model:k=auto", "auto:k=auto"]
    assert doc["settings"]["configs"] == labels
    results = doc["results"]
    assert [(r["config"], r["prompt_id"]) for r in results] == [(c, p) for c in labels for p in ("code", "emoji")]
    for r in results:
        assert {"config", "prompt_id", "tokens", "tokens_per_s", "speedup", "acceptance", "mean_accepted",
                "identical"} <= r.keys()
        assert r["tokens"] == 10 and r["tokens_per_s"] > 0 and len(r["runs_tokens_per_s"]) == 2
        assert r["identical"] == "identical", r  # the target drafting for itself: exact by construction
        # Each run's drafting priced on its own plain steps, a share of the run's time: nothing for `none`,
        # nor for a run without a steady plain step to price them on (10 tokens of drafts accepted whole).
        net = r["drafting_net"]
        assert (net is None) if r["config"] == "none" else (net is None or -1 < net < 1), r
        if r["config"] == "suffix:k=3":  # drafting nothing, it pays only for asking: a small loss
            assert -0.05 < net <= 0, r
        if r["config"] == "none":
            assert r["speedup"] == 1.0 and r["acceptance"] is None
        elif r["config"].startswith("model") and r["config"] != "model:k=auto":
            assert r["acceptance"] == 1.0 and r["mean_accepted"] > 1

    summary = {s["config"]: s for s in doc["summary"]}
    assert list(summary) == labels
    for s in summary.values():
        assert {"config", "geomean_speedup", "min_speedup", "acceptance", "predicted_speedup"} <= s.keys()
        assert s["failed"] is None and s["runs"] == 4
        assert s["identical"] == {"identical": 4, "parted": 0, "near_tie": 0, "different": 0}
        assert s["geomean_speedup"] > 0 and s["min_speedup"] <= s["geomean_speedup"] * (1 + 1e-9)
        # 10-token answers: too short to time over a shared text (shared_text.MIN_SHARED_TOKENS), and said so
        if s["config"] != "none":
            assert s["shared_runs"] == {"whole": 0, "prefix": 0, "left_out": 4} and s["shared_geomean"] is None
            assert f"over the text shared with plain decoding, {s['config']}: no run timed" in out
    assert summary["none"]["geomean_speedup"] == pytest.approx(1.0)
    k2 = summary["model:k=2"]
    assert k2["acceptance"] == 1.0 and k2["per_position"] == [1.0, 1.0]
    learnt = CostCurve(**curve)  # what the runs' own steps cost: the prediction's costs
    assert learnt.reps > 0 and learnt.n_past == 0
    assert math.isclose(k2["predicted_speedup"], predicted_speedup(learnt.ratio, 2, 1.0, learnt.draft_ratio), rel_tol=1e-9)
    assert set(k2["time_split"]) == {"draft", "verify", "python"}
    assert summary["model:k=auto"]["predicted_speedup"] is None  # K varies per step: only the per-step model applies
    # per-source counts: a model config's drafts all come from the model
    assert set(k2["drafted_by"]) == {"model"} and k2["accepted_by"]["model"] == k2["drafted_by"]["model"] > 0
    assert set(summary["auto:k=auto"]["drafted_by"]) <= {"suffix", "model"}
    # The worst prompt by drafting's own net is one of the prompts, and the report says it.
    assert summary["none"]["min_drafting_net"] is None
    priced = [s for s in summary.values() if s["min_drafting_net"] is not None]
    assert "suffix:k=3" in [s["config"] for s in priced]
    for s in priced:
        assert s["min_drafting_net_prompt"] in ("code", "emoji") and s["min_drafting_net"] <= s["median_drafting_net"]
        assert f"drafting's own net, {s['config']}: worst prompt {s['min_drafting_net']:+.1%}" in out
    assert "| config |" in out_md.read_text()


def test_bench_refuses_a_prompts_file_with_bad_lines(tmp_path, capsys, tiny_models):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "prompt": "x"}\n{"id": "b"\n')
    code = main(["bench", "--prompts", str(bad), "--target", str(tiny_models["a"]), "--configs", "none"])
    err = capsys.readouterr().err
    assert code == 1 and "line 2" in err and len(err.strip().splitlines()) == 1


def test_a_sampled_bench_compares_texts_with_a_seed_and_not_without(runtime):
    """With a seed each position draws from its own stream (decoding/position_streams.py): a run's text
    is plain decoding's wherever the rows agree, "parted" where the batch's rounding moved one; without a
    seed every run draws its own text and nothing is compared."""
    prompts = [BenchPrompt("p", runtime.target_model.chat_tokens([{"role": "user", "content": "hi"}]))]
    seeded = run_benchmark(runtime, prompts, parse_configs("none;suffix:k=2;model:k=2"),
                           BenchOptions(max_tokens=6, sampling=SamplingParams(temperature=0.8, seed=3),
                                        cost_curve_max_n=4))
    verdicts = {r["config"]: r["identical"] for r in seeded.document["results"]}
    assert verdicts["none"] == "identical" and {verdicts["suffix:k=2"], verdicts["model:k=2"]} <= {"identical", "parted"}
    assert seeded.document["settings"]["sampling"]["seed"] == 3
    assert all(set(s["identical"]) == {"identical", "parted", "near_tie", "different"} for s in seeded.document["summary"])
    unseeded = run_benchmark(runtime, prompts, parse_configs("none;model:k=2"),
                             BenchOptions(max_tokens=6, sampling=SamplingParams(temperature=0.8), cost_curve_max_n=4))
    assert all(r["identical"] is None for r in unseeded.document["results"])


def test_bench_times_the_text_each_run_shares_with_plain_and_prices_steps_past_the_printed_curve(runtime):
    """The tiny target drafting for itself writes plain decoding's text: each run is timed over all of it
    (bench/shared_text.py, from the step seconds runner.run_once records per token). Its 9-row steps lie past
    the 4-row curve printed, and the prediction from steps prices them anyway (it read "-" before)."""
    prompts = [BenchPrompt("p", runtime.target_model.chat_tokens([{"role": "user", "content": "hi"}]))]
    outcome = run_benchmark(runtime, prompts, parse_configs("none;model:k=8"),
                            BenchOptions(max_tokens=40, repeat=2, cost_curve_max_n=4))
    plain, drafted = outcome.summaries
    assert len(outcome.document["cost_curve"]["ratios"]) == 4
    assert drafted.predicted_from_steps is not None and drafted.predicted_from_steps > 0
    assert plain.shared_runs is None and drafted.shared_runs == {"whole": 2, "prefix": 0, "left_out": 0}
    result = {r["config"]: r for r in outcome.document["results"]}["model:k=8"]
    assert result["identical"] == "identical" and result["shared_tokens"] == result["tokens"] >= 16
    assert drafted.shared_geomean == pytest.approx(result["shared_speedup"]) and drafted.shared_min_prompt == "p"


def test_a_run_records_when_each_token_was_written(runtime):
    """Per token, the run's step seconds through the step that wrote it: drafts accepted in one step share it."""
    prompt = runtime.target_model.chat_tokens([{"role": "user", "content": "hi"}])
    runner = BenchRunner(runtime, [], [], max_tokens=20, sampling=SamplingParams())
    summary, ids, steps, seconds = runner.run_once(parse_config("model:k=4"), prompt, 20)
    assert len(seconds) == len(ids) == summary.tokens and seconds == sorted(seconds)
    assert len(set(seconds)) == summary.steps < len(ids)  # one time per step, several tokens a step
    assert seconds[-1] == pytest.approx(steps.seconds)


def test_a_bench_config_may_name_the_mtp_head():
    """`bench --configs "none;mtp:k=auto;auto:k=auto"` (docs/benchmarks.md's MTP recipe)."""
    from specllama.bench.configs import parse_configs

    assert [(c.drafter, c.k) for c in parse_configs("none;mtp:k=auto;mtp:k=2")] == [("none", 0), ("mtp", "auto"), ("mtp", 2)]


def test_the_bench_footer_shows_the_mtp_heads_learnt_cost():
    from specllama.bench.report import cost_curve_line
    from specllama.decoding.cost.curve import CostCurve

    curve = CostCurve(0.05, [1.0, 1.4], None, 256, 3)
    assert "MTP head" not in cost_curve_line(curve)
    assert cost_curve_line(curve, 0.15).endswith("c = - (no draft model); MTP head c = 0.15 a draft position")


def test_the_bench_record_names_the_attention_it_ran_with(tiny_models, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path / "cache"))
    out_json = tmp_path / "bench.json"
    code = main(["bench", "--prompts", str(_prompts_file(tmp_path)), "--target", str(tiny_models["a"]), "--ctx", "256",
                 "--max-tokens", "4", "--repeat", "1", "--configs", "none", "--flash-attn", "off", "--json", str(out_json)])
    assert code == 0, capsys.readouterr().err
    assert json.loads(out_json.read_text())["machine"]["flash_attn"] == "off"
