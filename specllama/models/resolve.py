"""From what the user typed for a model (a registry name or a path) to a file on disk.

A bare name that the registry knows is the registry's, even when a file or folder of that name
sits in the current directory (write ./NAME for the local one); anything with a path separator, a
.gguf suffix, or naming something on disk is a path. A path that cannot be used says why: missing,
a directory, a broken symlink or a symlink loop, not just "not found".
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from specllama.errors import ModelFileError
from specllama.models import store
from specllama.models.registry import Registry


def looks_like_path(ref: str, registry: Registry | None = None) -> bool:
    if os.sep in ref or (os.altsep and os.altsep in ref) or ref.endswith(".gguf"):
        return True
    if registry is not None and ref in registry.models:
        return False
    return os.path.lexists(ref)


def resolve(ref: str, registry: Registry, progress: store.Progress | None = None) -> Path:
    """A model name from the registry (fetched on first use) or a path on disk."""
    if looks_like_path(ref, registry):
        return check_model_path(Path(ref).expanduser())
    return store.ensure(registry.model(ref), progress or (lambda *a: None))


def check_model_path(path: Path) -> Path:
    try:
        path.stat()
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ModelFileError(f"model path {path} is a symlink loop (it resolves to itself)") from None
        if path.is_symlink():
            raise ModelFileError(f"model path {path} is a broken symlink (to {os.readlink(path)}, which does not exist)") from None
        if e.errno == errno.ENOENT:
            raise ModelFileError(f"model file not found: {path}") from None
        raise ModelFileError(f"cannot use model path {path}: {e.strerror or e}") from None
    if path.is_dir():
        raise ModelFileError(f"model path {path} is a directory, not a GGUF file")
    return path
