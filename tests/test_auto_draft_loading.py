"""`--drafter auto` loads the draft model only where what is known of this machine's costs (a
cached curve, or what earlier runs learnt) says it can pay."""

from __future__ import annotations

import pytest

from specllama import runtime as runtime_module
from specllama.decoding.cost.curve import CostCurve
from specllama.decoding.engine import GenerationConfig
from specllama.runtime import LoadOptions, Runtime

TWO_CORE = CostCurve(t1_s=0.05, ratios=[1.0, 1.54, 2.1, 2.72] + [3.3 + 0.6 * i for i in range(12)],
                     draft_ratio=0.54, n_past=256, reps=3)
FAST_VERIFY = CostCurve(t1_s=0.05, ratios=[1.0] * 16, draft_ratio=0.1, n_past=256, reps=3)


@pytest.fixture
def pair_refs(tiny_models, monkeypatch):
    """The pair names a draft (not passed with --draft): auto decides whether to load it."""
    monkeypatch.setattr(runtime_module, "model_refs", lambda opts, registry: (str(tiny_models["a"]), str(tiny_models["b"])))
    monkeypatch.setattr(runtime_module, "load_learned", lambda key, draft_path=None: None)  # not what other tests ran


@pytest.mark.parametrize("curve, loaded, said", [
    (TWO_CORE, False, "cannot pay"),
    (None, False, "not known yet"),
    (FAST_VERIFY, True, "can pay"),
])
def test_auto_loads_the_draft_only_where_it_can_pay(pair_refs, monkeypatch, curve, loaded, said):
    monkeypatch.setattr(runtime_module, "cached_curve", lambda target, draft_path: curve)
    status: list[str] = []
    opts = LoadOptions(n_ctx=256, load_draft=True, draft_if_pays=True)
    with Runtime(opts, registry=object(), status=status.append) as rt:
        assert rt.has_draft_model is loaded
        assert ("model" in rt.drafters) is loaded and {"auto", "suffix"} <= set(rt.drafters)
        assert sum(said in line for line in status) == 1
        ids = [e.id for e in rt.generate(rt.prompt_tokens("hello hello hello"),
                                         GenerationConfig(drafter="auto", k=3, max_tokens=8)) if hasattr(e, "id")]
        assert len(ids) <= 8


def test_model_drafter_asked_for_loads_the_draft_whatever_the_curve(pair_refs, monkeypatch):
    monkeypatch.setattr(runtime_module, "cached_curve", lambda target, draft_path: TWO_CORE)
    with Runtime(LoadOptions(n_ctx=256, load_draft=True, draft_if_pays=False), registry=object()) as rt:
        assert rt.has_draft_model
