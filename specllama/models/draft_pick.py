"""A draft for a target named alone: the smallest cached registry model that may draft
(role draft or any), is smaller than the target, and passes the tokenizer check from the headers.
Nothing is downloaded: a draft that is not on disk is not a candidate."""

from __future__ import annotations

from pathlib import Path

from specllama.errors import SpecllamaError
from specllama.llama.gguf_meta import check_compatibility
from specllama.models import hub, store
from specllama.models.registry import Registry
from specllama.models.resolve import looks_like_path


def target_on_disk(ref: str, registry: Registry) -> Path | None:
    """The target's file if it is already on disk (a path, a cached registry or hub model)."""
    if hub.is_hub_ref(ref):
        parsed = hub.parse_ref(ref)
        name = parsed.selector if parsed.selector and parsed.selector.lower().endswith(".gguf") else None
        return hub.cached(parsed.repo, name, parsed.revision) if name else None
    if looks_like_path(ref, registry):
        path = Path(ref).expanduser()
        return path if path.is_file() else None
    spec = registry.models.get(ref)
    return store.model_path(spec) if spec is not None and store.is_available(spec) else None


def pick_draft(target_ref: str, registry: Registry) -> str | None:
    """The registry name of a cached draft that can serve the target, or None."""
    target = target_on_disk(target_ref, registry)
    if target is None:
        return None
    target_size = target.stat().st_size
    candidates = []
    for spec in registry.models.values():
        if spec.role not in ("draft", "any") or spec.name == target_ref or not store.is_available(spec):
            continue
        path = store.model_path(spec)
        if path.resolve() != target.resolve() and path.stat().st_size < target_size:
            candidates.append((path.stat().st_size, spec.name, path))
    for _, name, path in sorted(candidates):
        try:
            if check_compatibility(path, target).compatible:
                return name
        except SpecllamaError:  # an unreadable candidate is simply not one
            continue
    return None
