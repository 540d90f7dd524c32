"""A model reference as the user typed it (a registry name or a path) -> a GGUF file on disk."""

from __future__ import annotations

import os
from pathlib import Path

from specllama.errors import ModelFileError
from specllama.models import store
from specllama.models.registry import Registry


def looks_like_path(ref: str) -> bool:
    return os.sep in ref or ref.endswith(".gguf") or Path(ref).exists()


def resolve(ref: str, registry: Registry, progress: store.Progress | None = None) -> Path:
    """A model name from the registry (fetched on first use) or a path on disk."""
    if looks_like_path(ref):
        path = Path(ref).expanduser()
        if not path.exists():
            raise ModelFileError(f"model file not found: {path}")
        return path
    return store.ensure(registry.model(ref), progress or (lambda *a: None))
