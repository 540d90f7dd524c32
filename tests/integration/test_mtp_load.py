"""Whether `--drafter auto` loads the target's own MTP head (runtime/draft_load.py decide_head):
always while its cost here is unknown (nothing to download; a head that does not pay is not fed),
and, once a run timed it (the cost store keeps it), only where it can pay at best: on llama.cpp
#23752's Metal costs no acceptance makes it pay, and feeding it would only cost. `--drafter mtp`
loads it whatever the costs."""

from __future__ import annotations

from pathlib import Path

import pytest

from specllama.decoding.cost.online import Prior
from specllama.decoding.engine import GenerationConfig
from specllama.runtime.cost_store import CostStore, RecordedDecision, save_learned
from specllama.runtime.draft_load import MTP_LOAD_AT, REVISIT, decide_head
from specllama.runtime.loaded import open_runtime
from specllama.runtime.options import LoadOptions
from specllama.runtime.plan import CostsKnown, FileFacts, Known, ModelFile, plan_load

AUTO = LoadOptions(load_draft=False, mtp_if_present=True, n_ctx=256)


def metal(n: int) -> float:  # llama.cpp #23752 (tests/unit/test_mtp_auto.py): batches cost ~1.1 rows a row
    return 1 + 1.1 * (n - 1)


def strix(n: int) -> float:  # a curve where the head pays (vLLM on Strix Halo)
    return {1: 1.0, 2: 1.52, 3: 1.61}.get(n, 1.61 + 0.1 * (n - 3))


def known(ratio, head_cost: float | None, last: RecordedDecision | None = None) -> Known:
    facts = FileFacts(n_ctx_train=4096, target_kv_per_token=1000, draft_kv_per_token=0, mtp_layers=1,
                      mtp_kv_per_token=100, available_memory=None)
    costs = CostsKnown(Prior(ratio, 0.04, None, learned=True), False, None, head_cost, last)
    return Known(ModelFile("t", Path("t.gguf")), None, False, 2, 2, False, costs, facts)


@pytest.mark.parametrize("ratio, head_cost, loaded", [(metal, 0.15, False), (strix, 0.06, True), (metal, None, True)],
                         ids=["metal-23752", "strix", "cost-unknown"])
def test_auto_loads_the_head_only_where_it_can_pay(ratio, head_cost, loaded):
    plan = plan_load(AUTO, known(ratio, head_cost))
    assert plan.sizes.mtp is loaded and ("mtp" in plan.drafters) is loaded and plan.mtp_load.load is loaded
    if not loaded:
        assert [n.fact for n in plan.notices] == ["mtp"] and "cannot pay here" in plan.notices[0].text
        assert f"{MTP_LOAD_AT:.2f}x" in plan.notices[0].detail


def test_the_head_asked_for_loads_whatever_the_costs():
    plan = plan_load(LoadOptions(load_draft=False, load_mtp=True, mtp_if_present=True, n_ctx=256), known(metal, 0.15))
    assert plan.sizes.mtp and plan.mtp_load is None


def test_a_kept_decision_stands_while_the_prediction_only_wobbles():
    now = decide_head(strix, 0.06, None).predicted
    plan = plan_load(AUTO, known(strix, 0.06, RecordedDecision(False, now - REVISIT / 2)))
    assert not plan.sizes.mtp and plan.mtp_load.kept and plan.mtp_load.record is None
    plan = plan_load(AUTO, known(strix, 0.06, RecordedDecision(False, now - 2 * REVISIT)))  # a real change
    assert plan.sizes.mtp and plan.mtp_load.record == RecordedDecision(True, pytest.approx(now))


def test_a_run_keeps_the_heads_cost_and_the_next_auto_run_leaves_a_head_that_cannot_pay(toy_models):
    target = toy_models["qwen35"]
    store = CostStore(target, 1, 1, 0, False)
    asked = LoadOptions(target=str(target), load_draft=False, load_mtp=True, n_ctx=256, threads=1)
    with open_runtime(asked) as rt:
        rt.generate(rt.prompt_tokens("hello hello hello"), GenerationConfig(drafter="mtp", k=3, max_tokens=8)).drain()
        timed = rt.step_costs.draft_ratio("mtp")
    assert store.head_cost() == pytest.approx(timed)  # kept for the next run here
    # What a run on Metal would have taught: batches as dear as llama.cpp #23752's, the head at 0.15.
    save_learned(store.learned_key, {"t1_s": 0.04, "ratios": {str(n): metal(n) for n in range(1, 17)},
                                     "draft_ratio": None}, None, 0.15)
    auto = LoadOptions(target=str(target), load_draft=False, mtp_if_present=True, n_ctx=256, threads=1)
    notices = []
    with open_runtime(auto, status=notices.append) as rt:
        assert rt.mtp is None and "mtp" not in rt.drafters
        assert rt.generate(rt.prompt_tokens("hello"), GenerationConfig(drafter="auto", max_tokens=4)).drain().tokens == 4
    assert any(n.fact == "mtp" and "cannot pay" in n.text for n in notices)
    with open_runtime(asked) as rt:  # asked for, it loads anyway
        assert rt.mtp is not None
