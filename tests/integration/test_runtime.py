"""The Runtime frees what it loaded, also when loading fails half way (tiny models)."""

from __future__ import annotations

import pytest

from specllama.errors import ModelFileError
from specllama.llama.context import DecodeContext
from specllama.llama.model import GGUFModel
from specllama.runtime import LoadOptions, open_runtime


@pytest.fixture
def closes(monkeypatch) -> list[str]:
    """Records every model and context closed, by file name and kind."""
    seen: list[str] = []
    for cls in (GGUFModel, DecodeContext):
        original = cls.close

        def spy(self, original=original, kind=cls.__name__):
            if getattr(self, "_model", None) or getattr(self, "_ctx", None):  # still holding its C resource
                path = self.path if kind == "GGUFModel" else self.model.path
                seen.append(f"{kind} {path.name}")
            original(self)
        monkeypatch.setattr(cls, "close", spy)
    return seen


def test_a_load_that_fails_half_way_frees_the_target(tiny_models, monkeypatch, closes):
    load = GGUFModel.__init__

    def refuse_the_draft(self, path, **kw):  # llama.cpp refusing the second file, after the first loaded
        if path == tiny_models["b"]:
            raise ModelFileError(f"llama.cpp could not load {path}")
        load(self, path, **kw)
    monkeypatch.setattr(GGUFModel, "__init__", refuse_the_draft)
    with pytest.raises(ModelFileError, match="could not load"):
        open_runtime(LoadOptions(target=str(tiny_models["a"]), draft=str(tiny_models["b"]), n_ctx=256))
    assert closes == ["DecodeContext a.gguf", "GGUFModel a.gguf"]  # the target was loaded, then freed


def test_a_runtime_is_a_context_manager(tiny_models, closes):
    with open_runtime(LoadOptions(target=str(tiny_models["a"]), draft=str(tiny_models["b"]), n_ctx=256)) as rt:
        assert rt.drafters == ("auto", "suffix", "model", "none") and rt.has_draft_model
        assert rt.placement == "CPU"  # this build offloads nothing
    assert sorted(closes) == ["DecodeContext a.gguf", "DecodeContext b.gguf", "GGUFModel a.gguf", "GGUFModel b.gguf"]


def test_a_context_other_than_the_one_asked_for_is_said(tiny_models):
    said: list[str] = []
    opts = LoadOptions(target=str(tiny_models["a"]), n_ctx=100, load_draft=False)
    with open_runtime(opts, status=lambda n: said.append(n.text)) as rt:
        got = rt.context_use()[1]
    assert got != 100 and said == [f"context: {got} tokens, not the 100 asked for (llama.cpp rounds it to whole blocks)"]
    said.clear()
    with open_runtime(LoadOptions(target=str(tiny_models["a"]), n_ctx=256, load_draft=False), status=lambda n: said.append(n.text)):
        pass
    assert said == []  # a size llama.cpp keeps as it is: nothing to say


def test_a_warm_up_leaves_every_cache_empty_and_the_answers_alike(tiny_models):
    import threading

    from specllama.decoding.engine import GenerationConfig, TokenEvent
    from specllama.llama import decode_threads

    options = LoadOptions(target=str(tiny_models["a"]), draft=str(tiny_models["b"]), n_ctx=256)
    config = GenerationConfig(max_tokens=12, drafter="model", k=2)
    answers = []
    for warm in (False, True):
        with open_runtime(options) as rt:
            calls = rt.target_ctx.llama_calls, rt.draft_ctx.llama_calls
            if warm:
                here = decode_threads.decodes_by_thread().get(threading.current_thread(), 0)
                rt.warm_up()
                assert rt.target_ctx.llama_calls == calls[0] + 3 and rt.draft_ctx.llama_calls == calls[1] + 3
                # on a thread that ended with it: none of its decodes ran on the caller's thread, which
                # a server's engine thread would then share OpenMP's cores with (llama/decode_threads.py)
                assert decode_threads.decodes_by_thread().get(threading.current_thread(), 0) == here
                assert not any(t.name == "specllama-warm-up" for t in decode_threads.decodes_by_thread())
                assert rt.target_ctx.past(0) == 0 and rt.draft_ctx.past(0) == 0
                assert rt.step_costs.steps == 0  # nothing timed into the costs
            answers.append([e.id for e in rt.generate(rt.prompt_tokens("count to five"), config)
                            if isinstance(e, TokenEvent)])
    assert answers[0] == answers[1] and len(answers[0]) == 12
