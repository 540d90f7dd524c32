"""From what the user typed for a model (a registry name, a path, or hf:OWNER/REPO:FILE_OR_QUANT)
to a file on disk.

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
from specllama.models import hub, store
from specllama.models.registry import Registry


def looks_like_path(ref: str, registry: Registry | None = None) -> bool:
    if hub.is_hub_ref(ref):
        return False
    if os.sep in ref or (os.altsep and os.altsep in ref) or ref.endswith(".gguf"):
        return True
    if registry is not None and ref in registry.models:
        return False
    return os.path.lexists(ref)


def resolve(ref: str, registry: Registry, progress: store.Progress | None = None) -> Path:
    """A model name from the registry (fetched on first use), a hub reference (fetched: the user
    named the hub) or a path on disk."""
    if hub.is_hub_ref(ref):
        return hub.fetch(hub.parse_ref(ref), progress)
    if looks_like_path(ref, registry):
        return check_model_path(Path(ref).expanduser())
    return store.ensure(registry.model(ref), progress or (lambda *a: None))


def header_source(ref: str, registry: Registry, scratch: Path) -> Path:
    """A file to read `ref`'s GGUF header from without downloading the model: the file itself when
    it is on disk or cached, else (a hub model) a sparse copy of its first megabytes in `scratch`.
    A model whose header cannot be had that way (registry packages) is "not cached"."""
    if hub.is_hub_ref(ref):
        return hub.header_of(hub.parse_ref(ref), scratch)
    if looks_like_path(ref, registry):
        return check_model_path(Path(ref).expanduser())
    spec = registry.model(ref)
    if store.is_available(spec) or spec.path is not None:
        return store.ensure(spec)  # a local path is checked there
    if spec.hub is not None and spec.registry is None:  # packages, when it has them, are its source: not the hub
        return hub.header_copy(spec.hub.repo, spec.hub.file, spec.hub.revision, scratch)
    raise ModelFileError(f"model '{ref}' is not cached; its header comes only with its download: "
                         f"`specllama models pull {ref}`")


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
