"""From what the user named (a pair, model names or paths) to loaded models, drafters and an Engine.

Shared by run, chat, batch and bench so they load, check and configure models the same way. The
draft/target pair is checked from the GGUF headers before any weights are loaded. A Runtime is a
context manager and frees whatever it loaded, also when loading fails half way.

Front-ends use its small public surface (names, placement, threads, context use, tokenising,
generate/cancel/reset), never the contexts or the engine's drafters directly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Hashable, Iterable, Iterator, Sequence

from specllama.decoding.acceptance import PositionAcceptance
from specllama.decoding.auto_drafter import AutoDrafter
from specllama.decoding.cost.cache import (
    MAX_N,
    MAX_N_PARALLEL,
    cache_file,
    cached_curve,
    cost_curve_for,
    learned_key,
    load_learned,
    save_learned,
)
from specllama.decoding.cost.curve import CostCurve
from specllama.decoding.cost.model import best_possible_rate
from specllama.decoding.cost.online import Prior, StepCosts, prior_from_snapshot
from specllama.decoding.drafters import Drafter, ModelDrafter
from specllama.decoding.engine import Engine, Generation, GenerationConfig, Request
from specllama.decoding.events import Event
from specllama.decoding.request import DRAFTERS, K_AUTO_MAX
from specllama.decoding.request_queue import RequestQueue
from specllama.decoding.suffix_drafter import SuffixDrafter
from specllama.errors import IncompatiblePairError, SpecllamaError
from specllama.llama.backend import default_threads, gpu_offload_supported
from specllama.llama.context import DecodeContext
from specllama.llama.gguf_meta import check_compatibility
from specllama.llama.kv_memory import available_memory, kv_bytes_per_sequence
from specllama.llama.model import GGUFModel
from specllama.models import store
from specllama.models.registry import Registry, load_registry
from specllama.models.resolve import looks_like_path, resolve
from specllama.slot_budget import plan_slots

STAIRS_SEQUENCES = 17  # stairs verification decodes K+1 sequences side by side: up to K = 16

# What exact mode changes, said wherever its output is compared: its greedy text is identical to
# plain decoding *in exact mode*, which can differ from a default run from the first token.
EXACT_MODE = "exact mode (Q8_0 KV cache, no repacked weights)"


@dataclass
class LoadOptions:
    """How to load: which models, and the settings that need a reload to change."""

    pair: str | None = None
    target: str | None = None  # a registry name or a path; overrides the pair's
    draft: str | None = None
    load_draft: bool = True  # False: do not load the pair's draft model (plain decoding or suffix only)
    # True (--drafter auto): load the draft only when this machine's cached cost curve says it can
    # pay, or when the user named it with --draft. See draft_decision().
    draft_if_pays: bool = False
    draft_corpus: str | None = None  # --draft-corpus FILE: text the suffix drafter also drafts from
    n_ctx: int = 4096
    threads: int | None = None
    threads_batch: int | None = None
    gpu_layers: int | None = None  # None: every layer where llama.cpp can offload (Metal, CUDA), else 0
    stairs: bool = False  # a target context with sequences to spare, for stairs verification
    exact: bool = False  # greedy output independent of the batch shape (see llama/context.py)
    parallel: int | str = 1  # the most prompts decoded together (batch, bench), or "auto": chosen from the costs
    prompts: int | None = None  # the prompts a job holds (batch): no more slots than that; None: unknown (serve)


def model_refs(opts: LoadOptions, registry: Registry) -> tuple[str, str | None]:
    """(target, draft or None) as the user asked: explicit models beat the pair's."""
    pair = registry.pair(opts.pair) if (opts.pair or not opts.target) else None
    target = opts.target or pair.target
    if not opts.load_draft:
        return target, None
    return target, opts.draft or (pair.draft if pair else None)


def context_note(asked: int, got: int, trained: int) -> str:
    """Why the context is not the size asked for: the model's limit, or llama.cpp's rounding."""
    why = f"the model was trained for {trained}" if asked > trained else "llama.cpp rounds it to whole blocks"
    return f"context: {got} tokens, not the {asked} asked for ({why})"


def model_acceptance(costs: StepCosts) -> PositionAcceptance:
    """The draft model's long-run acceptance record, priced on the live costs."""
    return PositionAcceptance(costs.ratio, costs.draft_ratio, k_max=K_AUTO_MAX)


def starting_prior(curve: CostCurve | None, learned: dict | None, draft_size_ratio: float | None) -> Prior:
    """What costs are believed before the first step: what an earlier run on this machine learnt,
    else the startup curve's shape (`specllama costs`), else a generic shape; the draft's cost from
    the same, else its file size against the target's (decoding reads every weight once per token:
    the 0.5B/1.5B pair's sizes say 0.44, measured 0.44-0.69)."""
    base = Prior(curve.ratio, curve.t1_s, curve.draft_ratio) if curve else Prior()
    prior = prior_from_snapshot(learned, base) if learned else base
    if prior.draft_ratio is None and draft_size_ratio is not None:
        prior.draft_ratio = draft_size_ratio
    return prior


def draft_decision(prior: Prior, draft_name: str, learned: bool) -> tuple[bool, str]:
    """Whether `--drafter auto` loads the draft model, and the status line that says why: only
    when what is known of this machine's costs (with this draft's) says it could pay at 100 %
    acceptance. Without anything learnt here it is not loaded: on CPUs a draft model rarely pays
    (design.md: the 2-core machine never), and loading it costs memory and seconds."""
    if not learned or prior.draft_ratio is None:
        return False, (f"auto drafter: not loading the draft model {draft_name}: its cost on this machine is not "
                       "known yet (run with --drafter model once, or `specllama costs`, to learn it); "
                       "drafting from the text itself")
    best = best_possible_rate(prior.ratio, prior.draft_ratio, K_AUTO_MAX)
    if best > 1.0:
        return True, f"auto drafter: loading the draft model {draft_name} (it can pay here: up to {best:.2f}x)"
    return False, (f"auto drafter: not loading the draft model {draft_name}: it cannot pay on this machine "
                   f"(at most {best:.2f}x even at 100 % acceptance); drafting from the text itself")


class Runtime:
    """Loaded models and contexts, the drafters a request may name, and the engine."""

    def __init__(self, opts: LoadOptions, registry: Registry | None = None,
                 progress: store.Progress | None = None, status: Callable[[str], None] | None = None):
        self.opts = opts
        self.target_model = self.draft_model = None
        self.target_ctx = self.draft_ctx = None
        self.suffix: SuffixDrafter | None = None
        try:
            self._load(opts, registry or load_registry(), progress, status)
        except BaseException:
            self.close()  # nothing half-loaded outlives a failed load
            raise

    def _load(self, opts: LoadOptions, registry: Registry, progress, status) -> None:
        target_ref, draft_ref = model_refs(opts, registry)
        if draft_ref and opts.draft_if_pays and not opts.draft and not looks_like_path(draft_ref, registry) \
                and not store.is_available(registry.model(draft_ref)):
            # Its cost here cannot have been measured: auto would not load it, so do not fetch it.
            if status:
                status(f"auto drafter: not fetching the draft model {draft_ref} (never downloaded, so its cost here "
                       "was never measured); drafting from the text itself")
            draft_ref = None
        self.target_path = resolve(target_ref, registry, progress)
        self.draft_path = resolve(draft_ref, registry, progress) if draft_ref else None
        if self.draft_path is not None:
            report = check_compatibility(self.draft_path, self.target_path)
            if not report.compatible:
                raise IncompatiblePairError(
                    f"{self.draft_path.name} cannot draft for {self.target_path.name}: " + "; ".join(report.reasons))
        threads = opts.threads or default_threads()
        self.gpu_layers = opts.gpu_layers if opts.gpu_layers is not None else (-1 if gpu_offload_supported() else 0)
        self.target_model = GGUFModel(self.target_path, n_gpu_layers=self.gpu_layers, exact=opts.exact)
        n_ctx = min(opts.n_ctx, self.target_model.n_ctx_train) if opts.n_ctx > 0 else self.target_model.n_ctx_train
        # Slots are counted with the draft's cache too: whether auto loads it is decided below.
        target_kv = kv_bytes_per_sequence(self.target_path, n_ctx, q8_0_cache=opts.exact)
        draft_kv = kv_bytes_per_sequence(self.draft_path, n_ctx) if self.draft_path else 0
        self.slot_plan = plan_slots(opts.parallel, prompts=opts.prompts, kv_bytes=target_kv + draft_kv,
                                    available=available_memory())
        slots = self.slots = self.slot_plan.count
        if opts.stairs and slots > 1:
            raise SpecllamaError("stairs verification runs one prompt at a time: drop --parallel or --verify stairs")
        self.target_ctx = DecodeContext(self.target_model, n_ctx=n_ctx, n_threads=threads,
                                        n_threads_batch=opts.threads_batch, exact=opts.exact,
                                        n_seq_max=STAIRS_SEQUENCES if opts.stairs else slots, unified=opts.stairs)
        if status and opts.exact and self.target_model.exact_max_batch < 2:
            status(f"exact mode: {self.target_path.name} has float weight matrices, whose batched sums differ from "
                   "one token's, so it verifies one token at a time: this is plain decoding")
        if status and opts.n_ctx > 0 and self.target_ctx.n_ctx != opts.n_ctx:
            status(context_note(opts.n_ctx, self.target_ctx.n_ctx, self.target_model.n_ctx_train))
        # Costs: what earlier runs learnt here, else the startup curve if one was measured; never a
        # blocking measurement (the first answer starts at once, plainly until steps show better).
        self.cost_curve: CostCurve | None = cached_curve(self.target_ctx, self.draft_path)
        self._learned_key = learned_key(self.target_ctx)
        learned = load_learned(self._learned_key, self.draft_path)
        size_ratio = (self.draft_path.stat().st_size / self.target_path.stat().st_size) if self.draft_path else None
        prior = starting_prior(self.cost_curve, learned, size_ratio)
        if self.draft_path is not None and opts.draft_if_pays and not opts.draft:
            known = (learned or {}).get("draft_ratio") is not None or (self.cost_curve and self.cost_curve.draft_ratio)
            load, why = draft_decision(prior, self.draft_path.name, bool(known))
            if status:
                status(why)
            if not load:
                self.draft_path = None
                prior.draft_ratio = None
                self.slot_plan = replace(self.slot_plan, kv_bytes=target_kv)
        self.step_costs = StepCosts(prior)
        drafters: dict[str, Drafter] = {}
        if self.draft_path is not None:
            self.draft_model = GGUFModel(self.draft_path, n_gpu_layers=self.gpu_layers)
            self.draft_ctx = DecodeContext(self.draft_model, n_ctx=n_ctx, n_threads=threads,
                                           n_threads_batch=opts.threads_batch, n_seq_max=slots)
            drafters["model"] = ModelDrafter(self.draft_ctx,
                                             one_token_decodes=os.environ.get("SPECLLAMA_DRAFT_ONE_TOKEN") == "1")
        ratio = self.step_costs.ratio
        # The suffix drafter costs microseconds of Python per step, no decode; the planner cuts
        # its drafts on the live costs (auto's choice is priced on them too).
        self.suffix = SuffixDrafter()
        if opts.draft_corpus:
            self.suffix.load_corpus(opts.draft_corpus, lambda text: self.target_model.tokenize(
                text, add_special=False, parse_special=False))
        acceptance = {"model": model_acceptance(self.step_costs)} if "model" in drafters else {}
        drafters["suffix"] = self.suffix
        drafters["auto"] = AutoDrafter(self.suffix, drafters.get("model"), acceptance.get("model"), cost_ratio=ratio)
        self.engine = Engine(self.target_ctx, drafters, acceptance, self.step_costs)

    def measure_startup_curve(self, remeasure: bool = False,
                              on_measure: Callable[[], None] | None = None) -> CostCurve:
        """The startup microbenchmark (`specllama costs`): timed now unless cached; it becomes the
        prior of the costs the engine learns (a few dozen real steps override it)."""
        max_n = MAX_N if self.slots == 1 else MAX_N_PARALLEL
        curve, _ = cost_curve_for(self.target_ctx, self.draft_ctx, remeasure=remeasure, on_measure=on_measure, max_n=max_n)
        self.cost_curve = curve
        learned = load_learned(self._learned_key, self.draft_path)
        self.step_costs.set_prior(starting_prior(curve, learned, self.step_costs.prior.draft_ratio))
        return curve

    # --- context manager ---------------------------------------------------------------------

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        costs = getattr(self, "step_costs", None)
        if costs is not None and costs.steps:
            save_learned(self._learned_key, costs.snapshot(), self.draft_path)  # the next run here starts from it
        for part in (self.draft_ctx, self.target_ctx, self.draft_model, self.target_model):
            if part is not None:
                part.close()

    # --- what front-ends use ---------------------------------------------------------------------

    @property
    def drafters(self) -> tuple[str, ...]:
        """The drafters a request may name with these models loaded, in the usual order."""
        return tuple(d for d in DRAFTERS if d in self.engine.drafters)

    @property
    def has_draft_model(self) -> bool:
        return self.draft_ctx is not None

    @property
    def target_name(self) -> str:
        return self.target_model.name

    @property
    def draft_name(self) -> str | None:
        return self.draft_model.name if self.draft_model else None

    @property
    def threads(self) -> int:
        return self.target_ctx.n_threads

    @property
    def threads_batch(self) -> int:
        return self.target_ctx.n_threads_batch

    @property
    def placement(self) -> str:
        """Where the models run, as a user should read it: "CPU" or "GPU (all layers)"."""
        if self.gpu_layers == 0 or not gpu_offload_supported():  # a CPU-only build offloads nothing
            return "CPU"
        return "GPU (all layers)" if self.gpu_layers < 0 else f"GPU ({self.gpu_layers} layers), CPU (the rest)"

    def context_use(self) -> tuple[int, int]:
        """(tokens held, context size) of the conversation."""
        return self.target_ctx.n_past, self.target_ctx.n_ctx

    def prompt_tokens(self, prompt: str, system: str | None = None) -> list[int]:
        # The context size bounds the work: a prompt far too long is refused before tokenising it all.
        return self.target_model.prompt_tokens(prompt, system, max_tokens=self.target_ctx.n_ctx)

    def chat_tokens(self, messages: list[dict]) -> list[int]:
        return self.target_model.chat_tokens(messages)

    def generate(self, prompt: Sequence[int], config: GenerationConfig) -> Generation:
        return self.engine.generate(prompt, config)

    def run_many(self, requests: Iterable[Request] | RequestQueue,
                 parallel: int | str | None = None) -> Iterator[tuple[Hashable, Event]]:
        """Several prompts decoded together (as many as `parallel`, default --parallel, says), as
        (tag, event) pairs; a RequestQueue feeds requests that arrive meanwhile."""
        return self.engine.run_many(requests, self.opts.parallel if parallel is None else parallel)

    @property
    def parallelism(self) -> int:
        """How many prompts run_many decodes together (under auto: on the costs known now)."""
        return self.engine.parallelism(self.opts.parallel)

    def parallel_reason(self) -> str:
        """Why --parallel auto starts where it does, in a clause for the batch's status line."""
        prior = self.step_costs.prior
        basis = ("what earlier runs' steps cost here" if prior.learned
                 else "the startup curve" if self.cost_curve else "a generic guess, nothing learnt here yet")
        why = f"--parallel auto: {self.slot_plan.describe()}; on {basis}; chosen again as this run's steps show their costs"
        if self.opts.exact:
            why += (f"; exact mode: at most {self.target_model.exact_max_batch} rows a decode and no repacked "
                    "kernels, so rows cost more than in a plain run")
        return why

    def parallelism_for(self, parallel: int | str) -> int:
        """What run_many would make of `parallel` now (a number within the slots, or auto's choice)."""
        return self.engine.parallelism(parallel)

    def judge_context(self) -> DecodeContext:
        """The target's context, for the benchmark's identity check (it decodes plainly to find
        near-ties); nothing else should decode in it behind the engine's back."""
        return self.target_ctx

    def cancel(self, tag: Hashable = None) -> None:
        """Stop generating after the current step (from any thread): everything, or one request of
        run_many's (its tag)."""
        self.engine.cancel(tag)

    def check(self, request: Request) -> None:
        """Refuse a request that cannot run (a prompt longer than the context, a drafter not
        loaded) before it is queued."""
        self.engine.check(request)

    def reset(self) -> None:
        self.engine.reset()

    def cost_cache_file(self) -> Path:
        """Where this machine's measured cost curve for these models and threads is kept."""
        return cache_file(self.target_ctx, self.draft_ctx, self.cost_curve.max_n if self.cost_curve else MAX_N)

    def llama_decode_time(self) -> dict[str, tuple[int, float]]:
        """Per model ("target", "draft"): llama_decode calls and seconds since loading, prompts
        included; beside a step's time it shows where a fast backend's time goes (llama.cpp itself,
        or the loop around it)."""
        out = {"target": (self.target_ctx.llama_calls, self.target_ctx.llama_seconds)}
        if self.draft_ctx is not None:
            out["draft"] = (self.draft_ctx.llama_calls, self.draft_ctx.llama_seconds)
        return out

    def learned_costs(self) -> bool:
        """Whether earlier runs here left step costs this run started from."""
        return load_learned(self._learned_key, self.draft_path) is not None

    @property
    def costs(self) -> StepCosts:
        """What steps cost here, as learnt so far (for --stats, bench and costs)."""
        return self.step_costs

    def describe(self, config: GenerationConfig) -> str:
        """One line: models, placement, threads (for --stats and the benchmark's record)."""
        draft = (f", draft {self.draft_path.name}" if self.draft_path and config.drafter in ("model", "auto")
                 and config.drafts else "")
        return f"target {self.target_path.name}{draft} on {self.placement}, threads {self.threads}" + (
            f", {EXACT_MODE}" if self.opts.exact else "")
