"""A private model cache for tests of the store (SPECLLAMA_CACHE in tmp_path), and what a pull left in it."""

from __future__ import annotations

import pytest


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "models"


def leftovers(models_dir):
    return sorted(p.name for p in models_dir.iterdir() if p.name.startswith("."))
