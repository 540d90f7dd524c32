"""What the model picker shows and checks, without any widget: the registry's models as rows, its
pairs as choices, and whether a chosen draft can serve a chosen target.

The check reads the GGUF headers (tokenizer, special tokens) in well under a second, so a pair
that cannot work is refused before seconds of weight loading, or gigabytes of download, are spent.
A model not yet in the cache cannot be checked: the picker says it will be fetched, and the check
runs again once it is, still before anything loads (model_swap.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from specllama.errors import SpecllamaError
from specllama.llama.gguf_meta import CompatReport, check_compatibility
from specllama.models import store
from specllama.models.registry import ModelSpec, Registry

HUB_NOTE = "hub, fetched on request"


@dataclass(frozen=True)
class ModelRow:
    name: str
    role: str
    size: int | None
    cached: bool
    source: str  # "local file", "registry" or HUB_NOTE
    description: str


@dataclass(frozen=True)
class Choice:
    """A target and an optional draft, as registry names (or paths); `pair` names where they came from."""

    target: str
    draft: str | None
    pair: str | None = None

    def label(self) -> str:
        return self.target + (f" ← {self.draft}" if self.draft else " (no draft model)")


@dataclass(frozen=True)
class Precheck:
    ok: bool  # False: refused, `text` says why
    text: str
    to_fetch: tuple[str, ...] = ()  # models that choosing this would download first


def source_of(spec: ModelSpec) -> str:
    return "local file" if spec.path else "registry" if spec.registry else HUB_NOTE


def model_rows(registry: Registry) -> list[ModelRow]:
    rows = []
    for spec in registry.models.values():
        cached = store.is_available(spec)
        size = spec.expected_size or (store.model_path(spec).stat().st_size if cached else None)
        rows.append(ModelRow(spec.name, spec.role, size, cached, source_of(spec), spec.description))
    return rows


def size_text(n: int | None) -> str:
    if not n:
        return "?"
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:,.0f} MB"


def pair_choices(registry: Registry) -> list[Choice]:
    return [Choice(p.target, p.draft, p.name) for p in registry.pairs.values()]


def precheck(registry: Registry, choice: Choice,
             check: Callable[..., CompatReport] = check_compatibility) -> Precheck:
    """Can this choice be loaded? Refused now when the headers say the draft cannot serve the target."""
    try:
        specs = [registry.model(choice.target)] + ([registry.model(choice.draft)] if choice.draft else [])
    except SpecllamaError as e:
        return Precheck(False, str(e))
    missing = tuple(s.name for s in specs if not store.is_available(s))
    if missing:
        how = "; ".join(f"{s.name} ({source_of(s)})" for s in specs if s.name in missing)
        return Precheck(True, f"not cached, will be fetched first: {how}. The pair is checked once "
                              "fetched, before loading.", missing)
    if choice.draft is None:
        return Precheck(True, "no draft model: plain decoding or prompt lookup only")
    target, draft = (store.model_path(s) for s in specs)
    try:
        report = check(draft, target)
    except SpecllamaError as e:  # not a GGUF file, truncated header
        return Precheck(False, str(e))
    if not report.compatible:
        return Precheck(False, f"{choice.draft} cannot draft for {choice.target}: " + "; ".join(report.reasons))
    return Precheck(True, f"compatible: {choice.draft} can draft for {choice.target} (same tokenizer)")
