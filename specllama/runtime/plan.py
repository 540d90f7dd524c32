"""What a session will load, decided before anything loads: `plan_load(options, known) -> LoadPlan`.

Two steps, so the decision can be read and tested on its own:
- `survey(options, registry)` reads the world once (which files name the models and whether they
  are on disk, the machine's threads and GPU support, what is known of the costs here);
- `plan_load(options, known)` is pure: from those facts alone it says which files, whether the
  draft model is loaded and why, the drafters requests may name, slots, threads and context, and
  the status lines to say. Nothing is printed or loaded.

`Runtime(plan, registry)` then fetches what is missing, checks the pair and loads (runtime/loaded.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specllama.decoding.cost.online import Prior
from specllama.decoding.request import DRAFTERS
from specllama.decoding.verifiers import TargetContext, context_for
from specllama.models.registry import Registry
from specllama.runtime.cost_store import CostStore, RecordedDecision
from specllama.runtime.draft_load import DraftLoad, decide
from specllama.runtime.notices import Notice
from specllama.runtime.options import LoadOptions, model_refs, parallel_slots


@dataclass(frozen=True)
class ModelFile:
    ref: str  # as named: a registry name, a path or a hub reference
    path: Path | None  # where it is on disk now; None: Runtime() fetches it

    @property
    def name(self) -> str:
        return self.path.name if self.path is not None else self.ref


@dataclass(frozen=True)
class CostsKnown:
    """What this machine knows of the pair's costs (only for files on disk: the keys name them)."""

    prior: Prior  # what is believed of the costs here (the decision is priced on it)
    draft_cost_known: bool  # the draft's cost here was measured (not guessed from file sizes)
    last_decision: RecordedDecision | None  # what an earlier run decided for this draft under auto


@dataclass(frozen=True)
class Known:
    """Everything plan_load reads: gathered once by survey(), or written by hand in tests."""

    target: ModelFile
    draft: ModelFile | None  # the draft the options or the pair name (None: none)
    draft_cached: bool  # the draft is on disk (a registry model never fetched is not)
    threads: int  # --threads, else the cores available
    threads_batch: int
    gpu_offload: bool  # this llama.cpp build can offload layers (Metal, CUDA)
    costs: CostsKnown | None  # None: the target is not on disk yet, so nothing can be known


@dataclass(frozen=True)
class LoadPlan:
    options: LoadOptions
    target: ModelFile
    draft: ModelFile | None  # the draft model to load; None: none
    named_draft: ModelFile | None  # the draft the options or the pair name, before auto's decision
    draft_load: DraftLoad | None  # --drafter auto's decision (None: the draft was asked for, or there is none)
    drafters: tuple[str, ...]  # what requests may name once loaded
    threads: int
    threads_batch: int
    gpu_layers: int  # -1: every layer
    slots: int  # prompts decoded together at most
    target_context: TargetContext  # what the verifiers asked for (decoding/verifiers.py)
    notices: tuple[Notice, ...]


def survey(options: LoadOptions, registry: Registry) -> Known:
    """Reads the registry, the disk, the machine and the cost store; downloads nothing."""
    from specllama.llama.backend import default_threads, gpu_offload_supported
    from specllama.models.draft_pick import target_on_disk

    target_ref, draft_ref = model_refs(options, registry)
    target = ModelFile(target_ref, target_on_disk(target_ref, registry))
    draft = ModelFile(draft_ref, target_on_disk(draft_ref, registry)) if draft_ref else None
    threads = options.threads or default_threads()
    threads_batch = options.threads_batch or threads
    offload = gpu_offload_supported()
    costs = None
    if target.path is not None:
        store = CostStore(target.path, threads, threads_batch, gpu_layers(options, offload), options.exact)
        draft_path = draft.path if draft is not None else None
        costs = CostsKnown(store.prior(draft_path), draft_path is not None and store.draft_cost_known(draft_path),
                           store.last_decision(draft_path) if draft_path is not None else None)
    return Known(target, draft, draft is not None and draft.path is not None, threads, threads_batch, offload, costs)


def gpu_layers(options: LoadOptions, offload: bool) -> int:
    return options.gpu_layers if options.gpu_layers is not None else (-1 if offload else 0)


def plan_load(options: LoadOptions, known: Known) -> LoadPlan:
    """Pure: what to load, from the options and what survey() found."""
    slots = parallel_slots(options.parallel)
    target_context = context_for(options.verifiers, slots)  # refuses slots a verifier cannot serve
    notices: list[Notice] = []
    draft, decision = known.draft, None
    if draft is not None and options.draft_if_pays and not options.draft:
        decision = _auto_decision(draft, known)
        notices.append(Notice("drafter", decision.text, decision.detail))
        if not decision.load:
            draft = None
    # "mtp" as asked for: whether the GGUF has MTP layers is known once it is read (runtime/loaded.py).
    drafters = tuple(d for d in DRAFTERS if (d != "model" or draft is not None) and (d != "mtp" or options.load_mtp))
    return LoadPlan(options, known.target, draft, known.draft, decision, drafters, known.threads, known.threads_batch,
                    gpu_layers(options, known.gpu_offload), slots, target_context, tuple(notices))


def _auto_decision(draft: ModelFile, known: Known) -> DraftLoad:
    if not known.draft_cached or known.costs is None or not known.costs.draft_cost_known:
        # Never used here (or never downloaded): its cost cannot have been measured; not fetched either.
        return decide(draft.name, lambda n: None, None, None)
    costs = known.costs
    return decide(draft.name, costs.prior.ratio, costs.prior.draft_ratio, costs.last_decision)
