"""The real Session: loaded models and contexts, the drafters a request may name, and the engine.

`open_runtime(options)` plans (runtime/plan.py), fetches what the plan needs and plans again with
the files' headers; `Runtime(plan)` then checks the pair from the GGUF headers before any weights
load, loads exactly what the plan says, and starts the engine's costs from what this machine knows
(runtime/cost_store.py).
A Runtime is a context manager and frees whatever it loaded, also when loading fails half way;
closing keeps what its steps taught for the next session here.

Front-ends use the Session protocol (runtime/session.py) and nothing else of it.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import Callable, Hashable, Iterable, Iterator, Sequence

from specllama.decoding.acceptance import PositionAcceptance
from specllama.decoding.cancel import CancelHandle
from specllama.decoding.catch_up import SPLIT, CatchUpChoice
from specllama.decoding.cost.curve import CostCurve
from specllama.decoding.cost.online import StepCosts
from specllama.decoding.drafters import Drafter, ModelDrafter
from specllama.decoding.engine import Engine, Generation, GenerationConfig, Request
from specllama.decoding.events import Event, Summary
from specllama.decoding.exactness import Comparison, compare_greedy, top2_gap
from specllama.decoding.mtp_drafter import MtpDrafter
from specllama.decoding.prepared import Prepared
from specllama.decoding.request import K_AUTO_MAX
from specllama.decoding.request_queue import RequestQueue
from specllama.decoding.suffix_drafter import SuffixDrafter
from specllama.errors import IncompatiblePairError
from specllama.llama import decode_threads
from specllama.llama.backend import gpu_offload_supported
from specllama.llama.context import DecodeContext
from specllama.llama.gguf_meta import check_compatibility
from specllama.llama.model import GGUFModel
from specllama.llama.mtp import MtpContext
from specllama.models import store
from specllama.models.registry import Registry
from specllama.models.resolve import resolve
from specllama.runtime.cost_store import MAX_N, MAX_N_PARALLEL, CostStore
from specllama.runtime.drafter_note import drafter_note
from specllama.runtime.notices import Notice
from specllama.runtime.options import LoadOptions
from specllama.runtime.plan import LoadPlan, Sizes, plan_load, survey
from specllama.runtime.rollback_note import rollback_notice, snapshot_depth
from specllama.runtime.session import ModelInfo, SessionInfo

Status = Callable[[Notice], None]


def context_note(asked: int, got: int, trained: int) -> str:
    """Why the context is not the size asked for: the model's limit, or llama.cpp's rounding."""
    why = f"the model was trained for {trained}" if asked > trained else "llama.cpp rounds it to whole blocks"
    return f"context: {got} tokens, not the {asked} asked for ({why})"


def model_acceptance(costs: StepCosts, source: str = "model", depth: int | None = None,
                     learnt: float | None = None) -> PositionAcceptance:
    """A decoding source's (the draft model's, the MTP head's) long-run acceptance record, priced
    on the live costs and its own draft decodes', over the positions it can draft (`depth`:
    chained MTP heads draft one position a head). `learnt`: its cost as earlier runs here timed it,
    believed until this run times it (the MTP head's, from the cost store)."""
    cost = partial(costs.draft_ratio, source)
    if learnt is not None:
        cost = partial(_timed_or, costs, source, learnt)
    return PositionAcceptance(costs.step_ratio, cost, k_max=min(K_AUTO_MAX, depth or K_AUTO_MAX))


def _timed_or(costs: StepCosts, source: str, learnt: float) -> float | None:
    return costs.draft_ratio(source) if costs.drafts_by.get(source) else learnt


def open_runtime(opts: LoadOptions, registry: Registry | None = None, progress: store.Progress | None = None,
                 status: Status | None = None) -> Runtime:
    """Plan, fetch what is missing, and load; `registry`: the one a command already read (it is
    read here only when none is given: one read per command)."""
    if registry is None:
        from specllama.models.registry import load_registry

        registry = load_registry()
    plan = plan_load(opts, survey(opts, registry))
    if plan.missing():  # its sizes need the files' headers: fetched, then planned again with them
        fetched = {f.ref: resolve(f.ref, registry, progress) for f in plan.missing()}
        plan = plan_load(opts, survey(opts, registry, fetched))
    return Runtime(plan, status)


class Runtime:
    """Loaded models and contexts, the drafters a request may name, and the engine (a Session)."""

    def __init__(self, plan: LoadPlan, status: Status | None = None):
        """The session `plan` describes, loaded; its notices go to `status` as they are known.
        The plan's files are on disk (open_runtime fetches them)."""
        if plan.sizes is None or plan.missing():
            raise ValueError("a plan made before its files were on disk: open_runtime fetches them and plans again")
        started = time.perf_counter()
        self.plan = plan
        self.opts = plan.options
        self.target_model = self.draft_model = None
        self.target_ctx = self.draft_ctx = None
        self.mtp: MtpContext | None = None
        self.suffix: SuffixDrafter | None = None
        self._notices: list[Notice] = []
        self._status = status
        try:
            for notice in self.plan.notices:
                self._say(notice)
            self._load(self.plan, plan.sizes)
        except BaseException:
            self.close()  # nothing half-loaded outlives a failed load
            raise
        self.load_s = time.perf_counter() - started

    def _say(self, notice: Notice) -> None:
        self._notices.append(notice)
        if self._status:
            self._status(notice)

    def _load(self, plan: LoadPlan, sizes: Sizes) -> None:
        opts = plan.options
        self.target_path = plan.target.path
        self.draft_path = plan.draft.path if plan.draft else None
        if self.draft_path is not None:
            report = check_compatibility(self.draft_path, self.target_path)
            if not report.compatible:
                raise IncompatiblePairError(
                    f"{self.draft_path.name} cannot draft for {self.target_path.name}: " + "; ".join(report.reasons))
        self.gpu_layers = plan.gpu_layers
        self.target_model = GGUFModel(self.target_path, n_gpu_layers=plan.gpu_layers, exact=opts.exact, load_mtp=sizes.mtp)
        n_ctx = sizes.n_ctx
        self.slot_plan = sizes.slot_plan
        self.slots = sizes.slots
        self.target_ctx = DecodeContext(self.target_model, n_ctx=n_ctx, n_threads=plan.threads,
                                        n_threads_batch=plan.threads_batch, exact=opts.exact,
                                        n_seq_max=sizes.target_context.sequences, unified=sizes.target_context.unified,
                                        snapshot_depth=snapshot_depth(self.target_model, opts.exact),
                                        flash_attn=opts.flash_attn, backend_argmax=opts.backend_argmax)
        if (notice := rollback_notice(self.target_ctx)) is not None:
            self._say(notice)
        if opts.exact and self.target_model.exact_max_batch < 2:
            self._say(Notice("exact", f"exact mode: {self.target_path.name} has float weight matrices, whose batched "
                                      "sums differ from one token's, so it verifies one token at a time: this is "
                                      "plain decoding"))
        if opts.n_ctx > 0 and self.target_ctx.n_ctx != opts.n_ctx:
            self._say(Notice("context", context_note(opts.n_ctx, self.target_ctx.n_ctx, self.target_model.n_ctx_train),
                             verbose_only=opts.n_ctx < self.target_model.n_ctx_train))
        self.store = CostStore(self.target_path, plan.threads, plan.threads_batch, plan.gpu_layers, opts.exact,
                               opts.flash_attn, opts.backend_argmax)
        record = plan.draft_load.record if plan.draft_load else None
        if record is not None and plan.named_draft is not None and plan.named_draft.path is not None:
            self.store.record_decision(plan.named_draft.path, record)  # the next identical run decides alike
        if plan.mtp_load is not None and plan.mtp_load.record is not None:
            self.store.record_decision(None, plan.mtp_load.record)
        # Costs start from what earlier runs learnt here with these very files, else the startup
        # curve if one was measured, else file sizes; never a blocking measurement: the first
        # answer starts at once.
        self.step_costs = StepCosts(self.store.prior(self.draft_path))
        drafters: dict[str, Drafter] = {}
        if self.draft_path is not None:
            self.draft_model = GGUFModel(self.draft_path, n_gpu_layers=plan.gpu_layers)
            # No snapshots: it drafts one token a decode, so they would never reach back over its
            # drafts; a recurrent draft model goes back to the checkpoint it takes before drafting.
            self.draft_ctx = DecodeContext(self.draft_model, n_ctx=n_ctx, n_threads=plan.threads,
                                           n_threads_batch=plan.threads_batch, n_seq_max=self.slots, snapshot_depth=0,
                                           flash_attn=opts.flash_attn)
            # Its catch-up timed both ways over its first steps, the cheaper kept (catch_up.py).
            catch_up = CatchUpChoice(fixed=SPLIT if opts.draft_one_token_decodes else None, trial=True)
            drafters["model"] = ModelDrafter(self.draft_ctx, catch_up=catch_up)
        # The suffix drafter costs microseconds of Python per step, no decode; a request's policy
        # cuts its drafts on the live costs (auto's choice is priced on them too).
        self.suffix = SuffixDrafter()
        if opts.draft_corpus:
            self.suffix.load_corpus(opts.draft_corpus, lambda text: self.target_model.tokenize(
                text, add_special=False, parse_special=False))
        if sizes.mtp:  # (a target without MTP layers, asked for them, was said by the plan)
            self.mtp = MtpContext(self.target_ctx)
            drafters["mtp"] = MtpDrafter(self.mtp)
        acceptance = {name: model_acceptance(self.step_costs, name, self.mtp.max_depth if name == "mtp" else None,
                                             self.store.head_cost() if name == "mtp" else None)
                      for name in ("model", "mtp") if name in drafters}
        drafters["suffix"] = self.suffix
        self.model_acceptance = acceptance.get("model")
        self.engine = Engine(self.target_ctx, drafters, acceptance, self.step_costs)

    # --- context manager ---------------------------------------------------------------------

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        cache = getattr(self, "prompt_cache", None)
        if cache is not None:
            cache.close()  # its writes under way finish first (a few seconds at most)
        costs = getattr(self, "step_costs", None)
        if costs is not None:
            self.store.save_learned(costs, self.draft_path)  # the next session here starts from it
        for part in (self.mtp, self.draft_ctx, self.target_ctx, self.draft_model, self.target_model):
            if part is not None:
                part.close()

    def use_prompt_cache(self, ram_bytes: int, disk_bytes: int, folder: Path | None, log=None):
        """Keep prompt prefixes beyond the slots, in memory and on disk (runtime/prompt_cache.py):
        `serve`'s. Returns the cache (None when both bounds are 0)."""
        from specllama.runtime.prompt_cache import PromptCache

        self.prompt_cache = None
        if ram_bytes > 0 or disk_bytes > 0:
            extra = {"log": log} if log is not None else {}
            self.prompt_cache = PromptCache(self.target_ctx, self.draft_ctx, ram_bytes=ram_bytes, disk_bytes=disk_bytes,
                                            folder=folder, **extra)
        self.engine.prompt_cache = self.prompt_cache
        return self.prompt_cache

    def prompt_cache_report(self) -> dict | None:
        """What the prompt cache holds and has given (`ps`), or None without one."""
        cache = getattr(self, "prompt_cache", None)
        return cache.report() if cache is not None else None

    # --- what was loaded ---------------------------------------------------------------------

    @property
    def drafters(self) -> tuple[str, ...]:
        """The drafters a request may name with these models loaded, in the usual order (auto and
        none always: the suffix drafter needs no model): as planned."""
        return self.plan.drafters

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
    def placement(self) -> str:
        """Where the models run, as a user should read it: "CPU" or "GPU (all layers)"."""
        if self.gpu_layers == 0 or not gpu_offload_supported():  # a CPU-only build offloads nothing
            return "CPU"
        return "GPU (all layers)" if self.gpu_layers < 0 else f"GPU ({self.gpu_layers} layers), CPU (the rest)"

    def describe(self) -> SessionInfo:
        return SessionInfo(_model_info(self.target_model), _model_info(self.draft_model), self.placement, self.gpu_layers,
                           self.target_ctx.n_threads, self.target_ctx.n_threads_batch, self.target_ctx.n_ctx, self.slots,
                           self.opts.exact, getattr(self, "load_s", 0.0), self.target_ctx.flash_attn)

    def notices(self) -> tuple[Notice, ...]:
        return tuple(self._notices)

    def context_use(self) -> tuple[int, int]:
        """(tokens held, context size) of the conversation."""
        return self.target_ctx.n_past, self.target_ctx.n_ctx

    # --- text ------------------------------------------------------------------------------------

    def tokenize(self, text: str, stop: Callable[[], bool] | None = None) -> list[int]:
        # The context size bounds the work: a text far too long is refused before tokenising it all;
        # `stop()` abandons a long one between pieces (a server's client that left).
        return self.target_model.tokenize(text, max_tokens=self.target_ctx.n_ctx, stop=stop)

    def warm_tokenizer(self) -> None:
        """Read the vocabulary's special texts now, not in the first request (a server's start)."""
        self.target_model.special_texts

    def warm_up(self) -> None:
        """A few decodes of each model now, then every cache emptied, as llama-server does at its start:
        the first request does not pay for the backend's first use of its kernels (a GPU loads them
        lazily, per batch shape) nor for paging the weights in. On the lent H100 a fresh serve's first
        answer took 2.8-3.0 ms a token where llama-server's took 2.5 and our later ones 2.2-2.4
        (bench/measured/lent-20261127-gpu-replay, inventory/0). Nothing is timed into the step costs.
        Its decodes run on a thread that ends with them: the caller's thread (a server's main thread)
        decoding once and the engine thread for good would leave OpenMP's threads asleep at every
        barrier (llama/decode_threads.py)."""
        tokens = (self.tokenize("warm up the kernels: a prompt, a verify batch, one token") * 2)[:16] or [0]

        def decodes() -> None:
            for ctx in (self.target_ctx, self.draft_ctx):
                if ctx is None:
                    continue
                ctx.decode(tokens[:-5], logits="none")  # a prompt's chunk
                ctx.decode(tokens[-5:-1], logits="all")  # a verify batch's rows
                ctx.decode(tokens[-1:], logits="last")  # a plain step

        decode_threads.on_passing_thread(decodes, name="specllama-warm-up")
        self.engine.reset()  # every cache and drafter emptied: the first request starts as from a fresh load

    def detokenize(self, tokens: Sequence[int]) -> str:
        return self.target_model.detokenize(tokens)

    def prompt_tokens(self, prompt: str, system: str | None = None) -> list[int]:
        return self.target_model.prompt_tokens(prompt, system, max_tokens=self.target_ctx.n_ctx)

    def chat_tokens(self, messages: list[dict], stop: Callable[[], bool] | None = None, tools: list[dict] | None = None,
                    continue_last: bool = False, bounded: bool = True, template_kwargs: dict | None = None) -> list[int]:
        """The conversation templated and tokenized, bounded like prompt_tokens (unless `bounded`
        is False: a server counting tokens, whose body size bounds the work); `stop()` abandons
        a long one between pieces (a server's client that left); `tools` go to the template;
        `continue_last` continues a last assistant message (prefill) instead of closing it;
        `template_kwargs` are extra template variables (chat_template_kwargs, enable_thinking)."""
        return self.target_model.chat_tokens(messages, max_tokens=self.target_ctx.n_ctx if bounded else None, stop=stop,
                                             tools=tools, continue_last=continue_last, template_kwargs=template_kwargs)

    def tool_call_format(self) -> str | None:
        return self.target_model.tool_call_format

    def chat_dialect(self):
        """(the template's dialect or None, whether its thinking is parsed): dialects/."""
        return self.target_model.dialect, self.target_model.thinks

    def render_chat(self, messages: list[dict], tools: list[dict] | None = None,
                    template_kwargs: dict | None = None) -> str:
        """The conversation as the template writes it, generation prompt included (not tokenized)."""
        return self.target_model.render_chat(messages, tools=tools, template_kwargs=template_kwargs)

    # --- generation (the engine's) -------------------------------------------------------------

    def generate(self, prompt: Sequence[int], config: GenerationConfig, cancel: CancelHandle | None = None) -> Generation:
        """One request; `cancel` (or the Generation's own handle) stops it from any thread."""
        return self.engine.generate(prompt, config, cancel)

    def run_many(self, requests: Iterable[Request] | RequestQueue,
                 parallel: int | str | None = None) -> Iterator[tuple[Hashable, Event]]:
        """Several prompts decoded together (as many as `parallel`, default --parallel, says), as
        (tag, event) pairs; a RequestQueue feeds requests that arrive meanwhile."""
        return self.engine.run_many(requests, self.opts.parallel if parallel is None else parallel)

    def interrupt(self) -> None:
        """Everything is stopping (a server's SIGTERM), from any thread: a long prompt's prefill
        ends after its current chunk (decoding/prefill.py: 256 tokens), with an error, instead of running on."""
        for ctx in (self.target_ctx, self.draft_ctx):
            if ctx is not None:
                ctx.interrupted = True

    def check(self, request: Request) -> Prepared:
        """Refuse a request that cannot run (a prompt longer than the context, a drafter not
        loaded) before it is queued; else the request prepared (its policy and grammar), which
        run_many admits as it is (decoding/prepared.py)."""
        return self.engine.check(request)

    def reset(self) -> None:
        self.engine.reset()

    @property
    def parallelism(self) -> int:
        """How many prompts run_many decodes together (under auto: on the costs known now)."""
        return self.engine.parallelism(self.opts.parallel)

    def parallelism_for(self, parallel: int | str) -> int:
        """What run_many would make of `parallel` now (a number within the slots, or auto's choice)."""
        return self.engine.parallelism(parallel)

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

    def judge(self, prompt: Sequence[int], reference: Sequence[int], candidate: Sequence[int]) -> Comparison:
        """Whether `candidate` is plain greedy decoding's `reference` (the benchmark's check): a
        divergence is judged by the target's top-2 gap there, from a fresh decode. Clears the cache."""
        return compare_greedy(self.target_ctx, prompt, reference, candidate)

    def top2_gap(self, tokens: Sequence[int]) -> float:
        return top2_gap(self.target_ctx, tokens)

    # --- costs ---------------------------------------------------------------------------------

    @property
    def costs(self) -> StepCosts:
        """What steps cost here, as learnt so far (for --stats, bench and costs)."""
        return self.step_costs

    @property
    def cost_curve(self) -> CostCurve | None:
        return getattr(self, "_curve", None) or self.store.curve(self.draft_path)

    def drafter_note(self, summary: Summary) -> Notice | None:
        """A drafter the request asked for that is not paying, with its measured cost and acceptance."""
        return drafter_note(summary, self.step_costs, self.model_acceptance, self.has_draft_model,
                            self.engine.acceptance.get("mtp"), self.mtp is not None)

    def suffix_calibration(self) -> list:
        return self.suffix.calibrator.report() if self.suffix is not None else []

    def startup_curve(self, remeasure: bool = False, on_measure: Callable[[], None] | None = None) -> CostCurve:
        """The startup microbenchmark (`specllama costs`): timed now unless cached; it becomes the
        prior of the costs the engine learns (a few dozen real steps override it)."""
        max_n = MAX_N if self.slots == 1 else MAX_N_PARALLEL
        self._curve = self.store.measure(self.target_ctx, self.draft_ctx, remeasure=remeasure, on_measure=on_measure,
                                         max_n=max_n)
        self.step_costs.set_prior(self.store.prior(self.draft_path))
        return self._curve

    def cost_cache_file(self) -> Path:
        """Where this machine's measured cost curve for these models and threads is kept."""
        curve = self.cost_curve
        return self.store.cache_file(self.draft_path, curve.max_n if curve else MAX_N)

    def learned_costs(self) -> bool:
        """Whether earlier runs here left step costs this run started from."""
        return self.store.learned(self.draft_path) is not None

    def learned_head_cost(self) -> float | None:
        """The target's MTP head's cost a draft position as earlier runs here timed it (None: never)."""
        return self.store.head_cost()

    def draft_catch_up(self) -> str | None:
        """How the draft model catches up before drafting, and why (decoding/catch_up.py); None: no draft model."""
        drafter = self.engine.drafters.get("model")
        return drafter.catch_up.describe() if drafter is not None else None

    def llama_decode_time(self) -> dict[str, tuple[int, float]]:
        """Per model ("target", "draft"): llama_decode calls and seconds since loading, prompts
        included; beside a step's time it shows where a fast backend's time goes (llama.cpp itself,
        or the loop around it)."""
        out = {"target": (self.target_ctx.llama_calls, self.target_ctx.llama_seconds)}
        if self.draft_ctx is not None:
            out["draft"] = (self.draft_ctx.llama_calls, self.draft_ctx.llama_seconds)
        return out


def _model_info(model: GGUFModel | None) -> ModelInfo | None:
    if model is None:
        return None
    info = model.info
    return ModelInfo(model.name, model.path.name, model.path, info.file_size, info.architecture, info.n_params,
                     info.quantization, model.n_vocab)
