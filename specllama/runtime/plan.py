"""What a session will load, decided before anything loads: `plan_load(options, known) -> LoadPlan`.

Two steps, so the decision can be read and tested on its own:
- `survey(options, registry)` reads the world once (which files name the models and whether they
  are on disk, what their GGUF headers say of context and cache sizes, the machine's threads, free
  memory and GPU support, what is known of the costs here);
- `plan_load(options, known)` is pure: from those facts alone it says which files, whether the
  draft model and the target's MTP head are loaded and why, the drafters requests may name, slots, threads, the context's
  size and shape (as the verifiers ask), and the status lines to say. Nothing is printed or loaded.

Sizes need the headers, so a plan whose files are not all on disk has none: `open_runtime` fetches
what `missing()` names, surveys and plans again, and `Runtime(plan)` loads exactly what it says
(runtime/loaded.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from specllama.decoding.cost.online import Prior, generic_ratio
from specllama.decoding.request import DRAFTERS
from specllama.decoding.verifiers import TargetContext, context_for
from specllama.errors import ModelFileError
from specllama.models.registry import Registry
from specllama.runtime.cost_store import CostStore, RecordedDecision
from specllama.runtime.draft_load import DraftLoad, decide, decide_head
from specllama.runtime.notices import Notice
from specllama.runtime.options import LoadOptions, model_refs, parallel_slots
from specllama.runtime.slot_budget import SlotPlan, plan_slots


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
    head_cost: float | None = None  # the target's MTP head's cost a draft position, learnt here (None: not yet)
    last_head_decision: RecordedDecision | None = None  # what an earlier run decided for the head under auto


@dataclass(frozen=True)
class FileFacts:
    """What the GGUF headers on disk say (read before any weights load) and the memory free now."""

    n_ctx_train: int  # the target's trained context
    target_kv_per_token: int  # KV cache bytes a token takes in the target's cache (exact mode's type where asked)
    draft_kv_per_token: int  # the same in the draft's (0: no draft on disk)
    mtp_layers: int  # the target's multi-token-prediction (nextn) layers (read where they may be loaded)
    mtp_kv_per_token: int  # the same in the MTP head's own context (0: not loaded)
    available_memory: int | None  # bytes free without swapping (None: unknown here)
    # A recurrent or hybrid model's state a sequence, with the snapshots (where its architecture has
    # them) and the checkpoints kept beside it: bytes a slot, whatever the context size.
    target_state_bytes: int = 0
    draft_state_bytes: int = 0


@dataclass(frozen=True)
class Sizes:
    """The contexts a plan loads, decided from the options, the headers and the free memory."""

    n_ctx: int  # the context asked for, within what the target was trained for
    slot_plan: SlotPlan  # cache sequences for prompts decoded together, and what bound their number
    target_context: TargetContext  # the target context's sequences and sharing, as its verifiers ask
    mtp: bool  # the target's MTP layers are loaded as a drafter

    @property
    def slots(self) -> int:
        return self.slot_plan.count


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
    files: FileFacts | None = None  # None: a file the plan needs is not on disk yet


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
    sizes: Sizes | None  # None: planned before the files were on disk (open_runtime fetches, then plans again)
    notices: tuple[Notice, ...]
    mtp_load: DraftLoad | None = None  # auto's decision for the target's MTP head (None: asked for, or none in the file)

    def missing(self) -> tuple[ModelFile, ...]:
        """The files to fetch before this plan can be loaded (the draft only where it is loaded)."""
        return tuple(f for f in (self.target, self.draft) if f is not None and f.path is None)


def survey(options: LoadOptions, registry: Registry, fetched: Mapping[str, Path] | None = None) -> Known:
    """Reads the registry, the disk, the headers, the machine and the cost store; downloads
    nothing. `fetched`: where files named by reference were just fetched to."""
    from specllama.llama.backend import default_threads, gpu_offload_supported
    from specllama.models.draft_pick import target_on_disk

    def locate(ref: str) -> ModelFile:
        return ModelFile(ref, (fetched or {}).get(ref) or target_on_disk(ref, registry))

    target_ref, draft_ref = model_refs(options, registry)
    target = locate(target_ref)
    draft = locate(draft_ref) if draft_ref else None
    threads = options.threads or default_threads()
    threads_batch = options.threads_batch or threads
    offload = gpu_offload_supported()
    costs = None
    if target.path is not None:
        store = CostStore(target.path, threads, threads_batch, gpu_layers(options, offload), options.exact,
                          options.flash_attn, options.backend_argmax)
        draft_path = draft.path if draft is not None else None
        costs = CostsKnown(store.prior(draft_path), draft_path is not None and store.draft_cost_known(draft_path),
                           store.last_decision(draft_path) if draft_path is not None else None,
                           store.head_cost(), store.last_decision(None))
    files = file_facts(options, target.path, draft.path if draft else None) if target.path is not None else None
    return Known(target, draft, draft is not None and draft.path is not None, threads, threads_batch, offload, costs,
                 files)


def file_facts(options: LoadOptions, target: Path, draft: Path | None) -> FileFacts:
    from specllama.decoding.request import K_MAX
    from specllama.llama.exact_rows import EXACT_MAX_BATCH, exact_max_batch
    from specllama.llama.gguf_header import read_header
    from specllama.llama.kv_memory import (
        available_memory,
        kv_bytes_per_token,
        mtp_kv_bytes_per_token,
        state_bytes_per_sequence,
    )
    from specllama.llama.rollback import KEPT_CHECKPOINTS, SNAPSHOTS, rollback_table
    from specllama.runtime.rollback_note import mtp_layers

    header = read_header(target, decode_arrays=False)
    arch = header.get("general.architecture")
    trained = header.get(f"{arch}.context_length")
    nextn = mtp_layers(target) if options.load_mtp or options.mtp_if_present else 0
    # As many snapshots as the context will be asked for (rollback_note.snapshot_depth, from the file).
    snapshots = 0
    if rollback_table().get(arch) == SNAPSHOTS:
        snapshots = min(K_MAX, exact_max_batch(target, EXACT_MAX_BATCH) - 1) if options.exact else K_MAX
    draft_kv = draft_state = 0
    if draft is not None:
        try:
            draft_kv, draft_state = kv_bytes_per_token(draft), state_bytes_per_sequence(draft, 0, KEPT_CHECKPOINTS + 1)
        except ModelFileError:  # said where the draft is loaded (the pair check), not where auto may leave it
            pass
    return FileFacts(int(trained) if isinstance(trained, int) else 0, kv_bytes_per_token(target, q8_0_cache=options.exact),
                     draft_kv, nextn, mtp_kv_bytes_per_token(target) if nextn else 0, available_memory(),
                     state_bytes_per_sequence(target, snapshots, KEPT_CHECKPOINTS + 1), draft_state)


def gpu_layers(options: LoadOptions, offload: bool) -> int:
    return options.gpu_layers if options.gpu_layers is not None else (-1 if offload else 0)


def plan_load(options: LoadOptions, known: Known) -> LoadPlan:
    """Pure: what to load, from the options and what survey() found."""
    notices: list[Notice] = []
    draft, decision = known.draft, None
    if draft is not None and options.draft_if_pays and not options.draft:
        decision = _auto_decision(draft, known)
        notices.append(Notice("drafter", decision.text, decision.detail))
        if not decision.load:
            draft = None
    sizes, head = None, None
    if known.files is not None and known.files.mtp_layers > 0 and options.mtp_if_present and not options.load_mtp:
        head = _head_decision(known)
        if not head.load:
            notices.append(Notice("mtp", head.text, head.detail))
    if known.files is not None and (draft is None or draft.path is not None):
        sizes = _sizes(options, known.files, draft is not None, head is None or head.load)
    else:  # refused now, not after minutes of downloading: a bad --parallel, slots a verifier cannot serve
        context_for(options.verifiers, parallel_slots(options.parallel))
    if sizes is not None and options.load_mtp and not sizes.mtp:
        notices.append(Notice("mtp", f"--drafter mtp: {known.target.name} has no MTP (nextn) layers to draft with"))
    # Before the headers are read, "mtp" as asked for.
    mtp = sizes.mtp if sizes is not None else options.load_mtp
    drafters = tuple(d for d in DRAFTERS if (d != "model" or draft is not None) and (d != "mtp" or mtp))
    return LoadPlan(options, known.target, draft, known.draft, decision, drafters, known.threads, known.threads_batch,
                    gpu_layers(options, known.gpu_offload), sizes, tuple(notices), head)


def _head_decision(known: Known) -> DraftLoad:
    costs = known.costs
    if costs is None:
        return decide_head(generic_ratio, None, None)
    return decide_head(costs.prior.ratio, costs.head_cost, costs.last_head_decision)


def _sizes(options: LoadOptions, files: FileFacts, with_draft: bool, with_mtp: bool = True) -> Sizes:
    from specllama.llama.kv_memory import cells_per_sequence

    n_ctx = min(options.n_ctx, files.n_ctx_train) if options.n_ctx > 0 else files.n_ctx_train
    # Slots are whole sequences of KV cache, allocated used or not: counted against the job's
    # prompts and the free memory (slot_budget.py).
    mtp = files.mtp_layers > 0 and with_mtp
    per_token = files.target_kv_per_token + (files.mtp_kv_per_token if mtp else 0)
    per_token += files.draft_kv_per_token if with_draft else 0
    fixed = files.target_state_bytes + (files.draft_state_bytes if with_draft else 0)
    slot_plan = plan_slots(options.parallel, prompts=options.prompts, kv_bytes=per_token * cells_per_sequence(n_ctx) + fixed,
                           available=files.available_memory)
    # The verifiers say what context they need for that many slots (and refuse what they cannot serve).
    return Sizes(n_ctx, slot_plan, context_for(options.verifiers, slot_plan.count), mtp)


def _auto_decision(draft: ModelFile, known: Known) -> DraftLoad:
    if not known.draft_cached or known.costs is None or not known.costs.draft_cost_known:
        # Never used here (or never downloaded): its cost cannot have been measured; not fetched either.
        return decide(draft.name, lambda n: None, None, None)
    costs = known.costs
    return decide(draft.name, costs.prior.ratio, costs.prior.draft_ratio, costs.last_decision)
