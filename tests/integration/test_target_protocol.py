"""The fake backend and the real context implement the one interface the engine uses
(decoding/target.DecodeTarget): same members, same parameter names and defaults."""

from __future__ import annotations

import inspect

import pytest

from specllama.decoding.target import DecodeModel, DecodeTarget
from specllama.llama.context import DecodeContext
from specllama.llama.model import GGUFModel
from tests.support.fake_llm import FakeContext, FakeModel, counting_rule


def members(protocol) -> tuple[set[str], set[str]]:
    """(methods, attributes) the protocol declares."""
    methods = {n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_")}
    return methods, set(getattr(protocol, "__annotations__", {})) - methods


def parameters(fn) -> list[tuple[str, object]]:
    return [(p.name, p.default) for p in inspect.signature(fn).parameters.values() if p.name != "self"]


@pytest.fixture(scope="module")
def real(tiny_models):
    model = GGUFModel(tiny_models["a"])
    ctx = DecodeContext(model, n_ctx=128, n_threads=1)
    yield ctx
    ctx.close()


@pytest.mark.parametrize("which", ["fake", "real"])
def test_both_contexts_have_every_member_the_engine_uses(which, real):
    ctx = FakeContext(counting_rule()) if which == "fake" else real
    methods, attributes = members(DecodeTarget)
    for name in methods:
        assert callable(getattr(ctx, name, None)), f"{which} context lacks {name}()"
        assert parameters(getattr(ctx, name)) == parameters(getattr(DecodeTarget, name)), name
    for name in attributes:
        assert hasattr(ctx, name), f"{which} context lacks .{name}"
    model_methods, model_attributes = members(DecodeModel)
    for name in model_methods | model_attributes:
        assert hasattr(ctx.model, name), f"{which} model lacks .{name}"


def test_the_fake_model_class_declares_what_the_protocol_asks():
    assert {"n_vocab", "n_ctx_train", "eog_ids", "is_eog"} <= set(dir(FakeModel))


def test_common_prefix_finds_the_first_difference_anywhere(real):
    real.clear()
    real.decode(list(range(10, 60)), logits="none")
    held = list(range(10, 60))
    for at in (0, 1, 17, 48, 49):
        other = held[:at] + [5] + held[at + 1:]
        assert real.common_prefix(other) == at
    assert real.common_prefix(held + [1, 2]) == 50 and real.common_prefix(held[:20]) == 20
    assert real.common_prefix([]) == 0
    real.clear()
