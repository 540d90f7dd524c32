"""From what the user named (a pair, model names or paths) to a loaded target, draft and Engine.

Shared by run, chat, batch and bench so they load, check and configure models the same way. The
draft/target pair is checked from the GGUF headers before any weights are loaded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from specllama.models import store
from specllama.decoding.adaptive_k import AdaptiveK
from specllama.models.registry import Registry, load_registry
from specllama.decoding.cost_cache import cost_curve_for
from specllama.decoding.cost_curve import CostCurve
from specllama.decoding.drafters import Drafter, ModelDrafter, NoDrafter, PromptLookupDrafter
from specllama.decoding.engine import Engine
from specllama.errors import IncompatiblePairError, ModelFileError, SpecllamaError
from specllama.llama.gguf_meta import check_compatibility
from specllama.llama.context import DecodeContext
from specllama.llama.model import GGUFModel
from specllama.llama.backend import default_threads
from specllama.models.resolve import looks_like_path, resolve  # noqa: F401 (moved; old import path kept)

DRAFTERS = ("model", "lookup", "none")


@dataclass
class LoadOptions:
    pair: str | None = None
    target: str | None = None  # a registry name or a path; overrides the pair's
    draft: str | None = None
    drafter: str = "model"
    p_min: float = 0.0
    n_ctx: int = 4096
    threads: int | None = None
    threads_batch: int | None = None
    gpu_layers: int = 0
    verify: str = "causal"
    auto_k: bool = False  # measure (or load) this machine's cost curve so -k auto can choose K
    remeasure_costs: bool = False  # measure it even when a cached curve exists (it was taken on a busy machine)


def model_refs(opts: LoadOptions, registry: Registry) -> tuple[str, str | None]:
    """(target, draft or None) as the user asked: explicit models beat the pair's."""
    pair = registry.pair(opts.pair) if (opts.pair or not opts.target) else None
    target = opts.target or pair.target
    needs_draft = opts.drafter == "model"
    draft = opts.draft or (pair.draft if pair and needs_draft else None)
    if needs_draft and draft is None:
        raise SpecllamaError("the model drafter needs a draft model: pass --draft NAME|PATH, "
                             "or use --drafter lookup / --no-draft")
    return target, draft if needs_draft else None


class Runtime:
    """Loaded models and contexts; the drafter can be switched without reloading."""

    def __init__(self, opts: LoadOptions, registry: Registry | None = None,
                 progress: store.Progress | None = None, status: Callable[[str], None] | None = None):
        registry = registry or load_registry()
        target_ref, draft_ref = model_refs(opts, registry)
        self.target_path = resolve(target_ref, registry, progress)
        self.draft_path = resolve(draft_ref, registry, progress) if draft_ref else None
        if self.draft_path is not None:
            report = check_compatibility(self.draft_path, self.target_path)
            if not report.compatible:
                raise IncompatiblePairError(
                    f"{self.draft_path.name} cannot draft for {self.target_path.name}: " + "; ".join(report.reasons))
        self.opts = opts
        threads = opts.threads or default_threads()
        # stairs verification decodes K sequences side by side, one per draft length.
        n_seq = 17 if opts.verify == "stairs" else 1
        self.target_model = GGUFModel(self.target_path, n_gpu_layers=opts.gpu_layers)
        n_ctx = min(opts.n_ctx, self.target_model.n_ctx_train) if opts.n_ctx > 0 else self.target_model.n_ctx_train
        self.target_ctx = DecodeContext(self.target_model, n_ctx=n_ctx, n_threads=threads,
                                        n_threads_batch=opts.threads_batch, n_seq_max=n_seq)
        self.draft_model: GGUFModel | None = None
        self.draft_ctx: DecodeContext | None = None
        if self.draft_path is not None:
            self.draft_model = GGUFModel(self.draft_path, n_gpu_layers=opts.gpu_layers)
            self.draft_ctx = DecodeContext(self.draft_model, n_ctx=n_ctx, n_threads=threads,
                                           n_threads_batch=opts.threads_batch)
        self.cost_curve: CostCurve | None = None
        if opts.auto_k:
            announce = (lambda: status("measuring this machine's decode costs for -k auto "
                                       "(about 10 s, once per machine, models and threads)...")) if status else None
            self.cost_curve, _ = cost_curve_for(self.target_ctx, self.draft_ctx, remeasure=opts.remeasure_costs,
                                                on_measure=announce)
        self._policies: dict[str, AdaptiveK] = {}
        self.engine = Engine(self.target_ctx)
        self.set_drafter(opts.drafter, opts.p_min)

    def make_drafter(self, kind: str, p_min: float = 0.0) -> Drafter:
        if kind == "model":
            if self.draft_ctx is None:
                raise SpecllamaError("no draft model loaded: start with a pair or --draft to use the model drafter")
            return ModelDrafter(self.draft_ctx, p_min=p_min)
        if kind == "lookup":
            return PromptLookupDrafter()
        if kind == "none":
            return NoDrafter()
        raise SpecllamaError(f"unknown drafter '{kind}': choose one of {', '.join(DRAFTERS)}")

    def set_drafter(self, kind: str, p_min: float | None = None) -> None:
        self.engine.drafter = self.make_drafter(kind, self.opts.p_min if p_min is None else p_min)
        self.engine.k_policy = self.k_policy(kind)

    def k_policy(self, kind: str) -> AdaptiveK | None:
        """The -k auto chooser of a drafter, kept across generations so it remembers its record."""
        if self.cost_curve is None or kind == "none":
            return None
        if kind not in self._policies:
            curve = self.cost_curve
            # Prompt lookup costs microseconds of Python: free next to a target decode.
            draft_cost = (curve.draft_ratio or 0.0) if kind == "model" else 0.0
            self._policies[kind] = AdaptiveK(curve.ratio, draft_cost, k_max=min(8, curve.max_n - 1))
        return self._policies[kind]

    @property
    def threads(self) -> int:
        return self.target_ctx.n_threads

    def close(self) -> None:
        for part in (self.draft_ctx, self.target_ctx, self.draft_model, self.target_model):
            if part is not None:
                part.close()
