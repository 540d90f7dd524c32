"""One load path: a command reads the registry once, plans once, and loads what the plan says (tiny models)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from specllama.cli.main import main
from specllama.decoding.verifiers import VERIFIERS, StairsVerifier, TargetContext
from specllama.errors import SpecllamaError
from specllama.llama.kv_memory import cells_per_sequence
from specllama.runtime import LoadOptions
from specllama.runtime.loaded import Runtime
from specllama.runtime.plan import FileFacts, Known, ModelFile, plan_load, survey
from specllama.runtime.slot_budget import SlotPlan


def test_run_reads_the_registry_once(tiny_models, monkeypatch, capsys):
    """Options, the prompt's model-name hint and the load all use the registry the command read."""
    from specllama.models import registry

    reads: list[int] = []
    real = registry.load_registry

    def counted(*args, **kwargs):
        reads.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(registry, "load_registry", counted)
    # One word: the prompt is also checked against the registry's model names (cmd_run.model_name_hint).
    code = main(["run", "hello", "--target", str(tiny_models["a"]), "--draft", str(tiny_models["b"]),
                 "--max-tokens", "3", "--ctx", "256", "--json"])
    out = capsys.readouterr().out
    assert code == 0 and json.loads(out)["tokens"] == 3
    assert len(reads) == 1


def files(**kw) -> FileFacts:
    return FileFacts(**{"n_ctx_train": 32768, "target_kv_per_token": 1000, "draft_kv_per_token": 0, "mtp_layers": 0,
                        "mtp_kv_per_token": 0, "available_memory": None, **kw})


def known(facts: FileFacts | None = None) -> Known:
    return Known(ModelFile("t", Path("t.gguf")), None, False, 2, 2, False, None, facts)


def test_loading_asks_the_verifier_for_the_context_it_needs(monkeypatch):
    """The plan's target context is what the verifiers declare: no scheme is special-cased outside them."""
    class Wide:
        name = "wide"

        def context(self, slots: int) -> TargetContext:
            return TargetContext(slots + 4, unified=True)

    monkeypatch.setitem(VERIFIERS, "wide", Wide())
    plan = plan_load(LoadOptions(verifiers=("wide",), parallel=2, n_ctx=512), known(files()))
    assert plan.sizes.target_context == TargetContext(6, True)
    # Several schemes share one context that serves each: stairs' shared sequences serve causal too.
    both = plan_load(LoadOptions(verifiers=("causal", "stairs"), n_ctx=512), known(files()))
    assert both.sizes.target_context == TargetContext(StairsVerifier.SEQUENCES, True)
    assert plan_load(LoadOptions(n_ctx=512, parallel=3), known(files())).sizes.target_context == TargetContext(3, False)


def test_stairs_with_several_prompts_is_refused_before_any_download():
    with pytest.raises(SpecllamaError, match="one prompt at a time"):
        plan_load(LoadOptions(verifiers=("stairs",), parallel=2), known(None))  # the target is not on disk yet


def test_the_plan_sizes_context_and_slots_from_the_headers_and_memory():
    kv = 1000 * cells_per_sequence(4096)
    plan = plan_load(LoadOptions(parallel="auto", n_ctx=4096), known(files(available_memory=kv * 6)))
    assert plan.sizes.n_ctx == 4096 and plan.sizes.slots == 3 and plan.sizes.slot_plan.limit == "memory"
    assert plan_load(LoadOptions(n_ctx=100_000), known(files())).sizes.n_ctx == 32768  # within the trained context
    assert plan_load(LoadOptions(n_ctx=512), known(None)).sizes is None  # no headers: no sizes, fetched first


def test_the_runtime_loads_what_the_plan_decided(tiny_models):
    """Slots and the context's shape come from the plan, not worked out again while loading."""
    from specllama.models.registry import load_registry

    opts = LoadOptions(target=str(tiny_models["a"]), load_draft=False, n_ctx=256, parallel=2)
    plan = plan_load(opts, survey(opts, load_registry()))
    assert plan.sizes.slots == 2
    sizes = replace(plan.sizes, slot_plan=SlotPlan(3, 1, "asked"), target_context=TargetContext(5, True))
    with Runtime(replace(plan, sizes=sizes)) as rt:
        assert rt.slots == 3 and rt.target_ctx.n_seq_max == 5 and rt.target_ctx.unified
        assert rt.drafters == plan.drafters


def test_a_plan_missing_its_files_fetches_them_then_plans_with_their_headers(tiny_models, monkeypatch):
    """Sizes need the headers: open_runtime fetches what the first plan lacks, once, and loads the second plan."""
    from specllama.models import draft_pick
    from specllama.models.registry import load_registry
    from specllama.runtime import loaded

    fetched: list[str] = []

    def fetch(ref, registry, progress):
        fetched.append(ref)
        return tiny_models["a"]

    monkeypatch.setattr(draft_pick, "target_on_disk", lambda ref, registry: None)  # nothing on disk yet
    monkeypatch.setattr(loaded, "resolve", fetch)
    opts = LoadOptions(target="to-fetch.gguf", load_draft=False, n_ctx=100_000)
    assert plan_load(opts, survey(opts, load_registry())).missing()
    with loaded.open_runtime(opts, load_registry()) as rt:
        assert fetched == ["to-fetch.gguf"]
        assert rt.plan.sizes is not None and rt.target_ctx.n_ctx == rt.plan.sizes.n_ctx < 100_000  # the trained size
