"""A script of scripts/measure imported fresh for a test: the scripts are not a package, and a module left in
sys.modules by one test would carry its globals (costs, vocabulary) into the next."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterator

from specllama.decoding.policy import registry
from tests.support import fake_llm

MEASURE = Path(__file__).resolve().parents[2] / "scripts" / "measure"


def fresh_scripts(monkeypatch, *names: str) -> Iterator[tuple[ModuleType, ...]]:
    """Yield scripts/measure/NAME.py for each name, imported anew (for a pytest fixture); forgotten afterwards."""
    monkeypatch.syspath_prepend(str(MEASURE))
    for name in names:
        sys.modules.pop(name, None)
    yield tuple(importlib.import_module(name) for name in names)
    for name in names:
        sys.modules.pop(name, None)


def fresh_script(monkeypatch, name: str) -> Iterator[ModuleType]:
    """The one script NAME, as fresh_scripts imports it."""
    for (module,) in fresh_scripts(monkeypatch, name):
        yield module


def isolate_replay(monkeypatch) -> None:
    """What importing and running policy_replay.py changes outside itself, restored after the test: it registers
    its question policies (oracle, steady shapes) at import, into a copy here so no other test sees them, and
    prompt_runs resizes the fake model's vocabulary and sets the replay's end tokens."""
    monkeypatch.setattr(registry, "POLICIES", dict(registry.POLICIES))
    monkeypatch.setattr(fake_llm, "VOCAB", fake_llm.VOCAB)
    monkeypatch.setattr(fake_llm.FakeModel, "n_vocab", fake_llm.FakeModel.n_vocab)
    monkeypatch.setattr(fake_llm.FakeModel, "eog_ids", fake_llm.FakeModel.eog_ids)
