"""`--drafter auto` loads the draft model only where its predicted gain clears the load margin
(runtime/draft_load.py), decided before anything loads (plan_load, pure) and the same for two
identical runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from specllama.decoding.cost.curve import CostCurve
from specllama.decoding.cost.online import Prior
from specllama.decoding.engine import GenerationConfig
from specllama.runtime.cost_store import CostStore, RecordedDecision
from specllama.runtime.draft_load import LOAD_AT, REVISIT, predicted_rate
from specllama.runtime.loaded import open_runtime
from specllama.runtime.options import LoadOptions
from specllama.runtime.plan import CostsKnown, Known, ModelFile, plan_load

AUTO = LoadOptions(load_draft=True, draft_if_pays=True, n_ctx=256)
TWO_CORE = CostCurve(t1_s=0.05, ratios=[1.0, 1.54, 2.1, 2.72] + [3.3 + 0.6 * i for i in range(12)],
                     draft_ratio=0.54, n_past=256, reps=3)
SIXTEEN_CORE = CostCurve(t1_s=0.02, ratios=[1.0, 1.15, 1.2, 1.27, 1.4, 1.5, 1.6, 1.75] + [1.9 + 0.1 * i for i in range(8)],
                         draft_ratio=0.67, n_past=256, reps=3)
FAST_VERIFY = CostCurve(t1_s=0.05, ratios=[1.0] * 16, draft_ratio=0.1, n_past=256, reps=3)


def known(curve: CostCurve | None, *, cached: bool = True, last: RecordedDecision | None = None) -> Known:
    prior = Prior(curve.ratio, curve.t1_s, curve.draft_ratio) if curve else Prior()
    return Known(ModelFile("t", Path("t.gguf")), ModelFile("d", Path("d.gguf") if cached else None), cached, 2, 2,
                 False, CostsKnown(prior, curve is not None and curve.draft_ratio is not None, last))


@pytest.mark.parametrize("curve, loaded, says", [
    (TWO_CORE, False, "would not pay here (0."),  # 2 cores: compute-bound, the draft never pays
    (SIXTEEN_CORE, False, "would not pay here (1.0"),  # 1.25x at 100 %, 1.07x at 90 %: measured 1.00x there
    (FAST_VERIFY, True, "drafting with the draft model"),
    (None, False, "cost here is unknown"),
])
def test_the_draft_loads_only_where_its_prediction_clears_the_margin(curve, loaded, says):
    plan = plan_load(AUTO, known(curve))
    assert (plan.draft is not None) is loaded and ("model" in plan.drafters) is loaded
    assert [n.fact for n in plan.notices] == ["drafter"] and says in plan.notices[0].text
    assert f"{LOAD_AT:.2f}x" in plan.notices[0].detail  # -v says which margin


def test_a_draft_never_downloaded_is_not_fetched_to_be_judged():
    plan = plan_load(AUTO, known(FAST_VERIFY, cached=False))
    assert plan.draft is None and "unknown" in plan.notices[0].text


def test_a_draft_asked_for_loads_whatever_the_costs():
    for opts in (LoadOptions(load_draft=True, draft_if_pays=False), LoadOptions(draft="d", draft_if_pays=True)):
        plan = plan_load(opts, known(TWO_CORE))
        assert plan.draft is not None and plan.draft_load is None and not plan.notices


def test_planning_is_pure_the_same_facts_give_the_same_plan():
    facts = known(SIXTEEN_CORE, last=RecordedDecision(False, 1.05))
    assert plan_load(AUTO, facts) == plan_load(AUTO, facts)


@pytest.mark.parametrize("last, now, loaded, kept", [
    (RecordedDecision(False, LOAD_AT - 0.03), LOAD_AT + 0.03, False, True),  # a wobble across the margin: kept
    (RecordedDecision(True, LOAD_AT + 0.03), LOAD_AT - 0.03, True, True),
    (RecordedDecision(False, LOAD_AT - 0.05), LOAD_AT - 0.05 + REVISIT + 0.02, True, False),  # a real change
])
def test_a_decision_is_revisited_only_when_the_prediction_really_moved(last, now, loaded, kept):
    curve = curve_predicting(now)
    plan = plan_load(AUTO, known(curve, last=last))
    assert (plan.draft is not None) is loaded and plan.draft_load.kept is kept
    assert plan.draft_load.record == (None if kept else RecordedDecision(loaded, pytest.approx(now)))


def curve_predicting(rate: float, c: float = 0.1) -> CostCurve:
    """A curve on which one draft at 90 % acceptance is the best length and predicts `rate`."""
    r2 = 1.9 / rate - c
    curve = CostCurve(t1_s=0.05, ratios=[1.0, r2] + [float(n) for n in range(3, 17)], draft_ratio=c, n_past=256, reps=3)
    assert predicted_rate(curve.ratio, c) == pytest.approx(rate)
    return curve


# --- end to end: the decision as two `specllama run` calls in a row see it -------------------------------------


def learn(store: CostStore, draft: Path, rate: float) -> None:
    """What a run leaves for the next: a StepCosts snapshot in which the draft predicts `rate`."""
    from specllama.runtime.cost_store import save_learned

    curve = curve_predicting(rate)
    save_learned(store.learned_key, {"t1_s": 0.05, "ratios": {str(n): curve.ratio(n) for n in range(1, 17)},
                                     "draft_ratio": curve.draft_ratio}, draft)


@pytest.fixture
def tiny_pair(tiny_models, tmp_path):
    """A registry whose pair drafts with tiny "b" for tiny "a": the draft is the pair's, not named
    with --draft, so auto decides whether it loads."""
    from specllama.models.registry import load_registry

    user = tmp_path / "models.toml"
    user.write_text(f'[models.tiny-a]\npath = "{tiny_models["a"]}"\nrole = "target"\n'
                    f'[models.tiny-b]\npath = "{tiny_models["b"]}"\nrole = "draft"\n'
                    '[pairs.tiny]\ntarget = "tiny-a"\ndraft = "tiny-b"\n')
    return load_registry(user=user)


def test_two_identical_runs_decide_alike_though_the_first_moved_the_prediction(tiny_models, tiny_pair):
    """Issue 29: the first run said "cannot pay (at most 0.92x)", its steps refined the learnt
    costs, and the second loaded the draft ("up to 1.01x"). Here each run's learning moves the
    prediction across the margin; the next run keeps the first run's decision."""
    target, draft = tiny_models["a"], tiny_models["b"]
    opts = LoadOptions(pair="tiny", load_draft=True, draft_if_pays=True, n_ctx=256, threads=1)
    store = CostStore(target, 1, 1, 0, False)
    learn(store, draft, LOAD_AT - 0.04)
    decisions = []
    for rate_after in (LOAD_AT + 0.04, LOAD_AT - 0.02):
        notices = []
        with open_runtime(opts, registry=tiny_pair, status=notices.append) as rt:
            decisions.append(rt.has_draft_model)
            ids = [e.id for e in rt.generate(rt.prompt_tokens("hello hello hello"),
                                             GenerationConfig(drafter="auto", max_tokens=4)) if hasattr(e, "id")]
            assert 1 <= len(ids) <= 4
        assert [n.fact for n in notices].count("drafter") == 1
        learn(store, draft, rate_after)  # what the run's steps taught (they replace what it saved)
    assert decisions == [False, False]
    learn(store, draft, LOAD_AT - 0.04 + REVISIT + 0.1)  # a real change (a remeasured curve, say): decided again
    with open_runtime(opts, registry=tiny_pair) as rt:
        assert rt.has_draft_model
