"""The speculative step loop, as a scheduler of sequences: one loop for every mode.

Each active request holds a slot (a KV-cache sequence of the target, and of the draft model).
A step reads as its phases, the way gpt-fast's `speculative_decode` does, over all of them:
  plan    - how many drafts each sequence gets (planner.py), on the costs this engine's own steps
            have shown (cost/online.py) and each text's acceptance;
  draft   - each drafter proposes for all of its sequences at once, with its confidence per token
            where it has one; the planner cuts what is sent (one cut, on the same costs);
  decode  - ONE target decode of [last] + drafts of every sequence (own positions and sequence id);
  judge   - each sequence's drafts accepted by greedy match or rejection sampling;
  commit  - each sequence's caches keep what it accepted (both rollbacks side by side); the step's
            time, as it was paid, feeds the cost estimate;
  emit    - token events (whose texts concatenate to the output) and a step event per sequence.
A finished request frees its slot and the next waiting prompt is admitted at once (continuous
batching). A prompt's prefill is its own decode between steps, not rows riding in a step's batch:
its cache then holds exactly what a lone run's holds (exact mode's promise that the text does not
depend on N), and on a CPU a prefill batch of hundreds of tokens is compute-bound anyway, so the
few rows a step would add to it are saved once per prompt, not once per step.

`generate` (chat, run, bench) is the case of one request and one slot; plain decoding is K = 0.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Hashable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from specllama.decoding.acceptance import PositionAcceptance
from specllama.decoding.cost.model import choose_parallel
from specllama.decoding.cost.online import StepCosts
from specllama.decoding.drafters import Drafter, DraftRequest, NoDrafter, Proposal
from specllama.decoding.events import DoneEvent, Event, FailedEvent, Generation, StepEvent, Summary, TokenEvent
from specllama.decoding.planner import Planner
from specllama.decoding.request import AUTO, GenerationConfig
from specllama.decoding.request_queue import CLOSED, RequestQueue
from specllama.decoding.sampling import probabilities
from specllama.decoding.sequence import SequenceState
from specllama.decoding.stop import StopMatcher
from specllama.decoding.target import DecodeTarget
from specllama.decoding.verifiers import VERIFIERS, exact_rows
from specllama.decoding.verify import Verdict, verify_greedy, verify_sampling
from specllama.errors import ContextOverflowError, SpecllamaError
from specllama.llama.model import StreamDecoder

# Re-exported: most callers want the request and its results from one place.
__all__ = ["Engine", "Request", "GenerationConfig", "Generation", "Summary", "TokenEvent", "StepEvent",
           "DoneEvent", "FailedEvent"]


@dataclass
class Request:
    prompt: Sequence[int]
    config: GenerationConfig
    tag: Hashable = None  # how run_many names this request's events


class Engine:
    """A target context and the drafters a request may name.

    `drafters` maps a drafter name to the drafter (the runtime owns them, with their caches);
    `acceptance` maps a drafter without its own confidence (the draft model) to its long-run
    per-position acceptance record, kept across generations; `costs` is what steps cost on this
    machine, learnt from every step this engine runs (the runtime seeds it from the cache);
    `clock` times the steps (tests pass a fake backend's clock).
    """

    def __init__(self, target: DecodeTarget, drafters: Mapping[str, Drafter] | None = None,
                 acceptance: Mapping[str, PositionAcceptance] | None = None, costs: StepCosts | None = None,
                 clock: Callable[[], float] = time.perf_counter):
        self.target = target
        self.drafters: dict[str, Drafter] = {"none": NoDrafter(), **(drafters or {})}
        self.acceptance: dict[str, PositionAcceptance] = dict(acceptance or {})
        self.costs = costs or StepCosts()
        self.clock = clock
        self.planner = Planner(self.costs, exact_rows(self.target))
        # Draft models that time their own draft positions (drafters.ModelDrafter).
        self._draft_models = [d for d in self.drafters.values() if hasattr(d, "timed_decodes")]
        # Contexts whose time inside llama_decode a step reports (the target's, the draft model's).
        contexts = [target] + [getattr(d, "ctx", None) for d in self.drafters.values()]
        self._timed = list({id(c): c for c in contexts if hasattr(c, "llama_seconds")}.values())
        # A unified cache (stairs verification) uses its extra sequences as scratch: one slot.
        self.slots = 1 if getattr(target, "unified", False) else getattr(target, "n_seq_max", 1)
        self._cancel = False
        self._cancel_tags: set = set()

    def cancel(self, tag: Hashable = None) -> None:
        """Ask generation to stop after the current step (from any thread): every request, or
        (with a tag) only that one of run_many's."""
        if tag is None:
            self._cancel = True
        else:
            self._cancel_tags.add(tag)

    def reset(self) -> None:
        """Forget every cache: the next generation starts from an empty context (a failed decode
        can leave a cache out of step with its token list; a benchmark run must not inherit one).
        What steps cost is kept: it is the machine's, not the text's."""
        self.target.clear()
        for drafter in self.drafters.values():
            drafter.reset()

    def drafter_for(self, config: GenerationConfig) -> Drafter:
        if not config.drafts:
            return self.drafters["none"]
        drafter = self.drafters.get(config.drafter)
        if drafter is None:
            hint = " (no draft model is loaded: pass --draft or a pair)" if config.drafter == "model" else ""
            raise SpecllamaError(f"the {config.drafter} drafter is not available{hint}")
        return drafter

    def acceptance_for(self, config: GenerationConfig, drafter: Drafter) -> PositionAcceptance | None:
        """The record the planner sizes this request's drafts on: only under -k auto, and only for
        a drafter without its own per-token confidence (a confident drafter's drafts are cut on it)."""
        if config.k != AUTO or isinstance(drafter, NoDrafter) or getattr(drafter, "confident", False):
            return None
        record = self.acceptance.get(drafter.name)
        if record is None:
            raise SpecllamaError(f"-k auto has no acceptance record for the {drafter.name} drafter")
        return record

    def parallelism(self, parallel: int | str) -> int:
        """How many sequences to run at once: a number, or "auto": the N that makes the most
        tokens per second on the costs known now (capped by the slots and exact mode)."""
        limit = exact_rows(self.target)
        most = self.slots if limit is None else min(self.slots, limit)
        if parallel == AUTO:
            return choose_parallel(self.costs.ratio, most)
        return max(1, min(int(parallel), most))

    def check(self, request: Request) -> None:
        """Refuse a request that cannot run, before anything is decoded."""
        if not request.prompt:
            raise SpecllamaError("empty prompt")
        if len(request.prompt) + 1 > self.target.n_ctx:
            raise ContextOverflowError(
                f"the prompt is {len(request.prompt)} tokens but the context holds {self.target.n_ctx} "
                f"(raise --ctx, at most the model's {self.target.model.n_ctx_train}, or shorten the prompt)")
        drafter = self.drafter_for(request.config)
        self.acceptance_for(request.config, drafter)
        if request.config.verify == "stairs":
            VERIFIERS["stairs"].max_k(self.target)  # refuses a context without sequences to spare

    def generate(self, prompt: Sequence[int], config: GenerationConfig) -> Generation:
        """One request: checks it now (a prompt that cannot fit fails here, before any decoding)
        and returns the generation to iterate."""
        request = Request(list(prompt), config)
        self.check(request)
        self._cancel, self._cancel_tags = False, set()
        return Generation(event for _, event in self._schedule(iter([request]), 1, isolate=False))

    def run_many(self, requests: Iterable[Request] | RequestQueue, parallel: int | str = AUTO) -> Iterator[tuple[Hashable, Event]]:
        """Every request, up to `parallel` at once, as (tag, event) pairs; each request ends with
        a DoneEvent or, when it could not run, a FailedEvent (the others go on). A RequestQueue
        feeds requests that arrive while it runs (a server): they join between steps. Under
        "auto" the number is chosen again as the costs become known."""
        self._cancel, self._cancel_tags = False, set()
        source = requests if hasattr(requests, "poll") else iter(requests)
        return self._schedule(source, parallel, isolate=True)

    # --- the loop ----------------------------------------------------------------------------

    def _schedule(self, requests, parallel: int | str, isolate: bool) -> Iterator[tuple[Hashable, Event]]:
        active: list[SequenceState] = []
        free = list(range(self.slots))
        pending = True
        while True:
            n_parallel = self.parallelism(parallel)
            while pending and len(active) < n_parallel and not self._cancel:
                request = _next_request(requests, idle=not active)
                if request is CLOSED:
                    pending = False
                    break
                if request is None:  # a live source (RequestQueue) with nothing waiting now
                    break
                try:
                    self.check(request)
                    active.append(self._admit(request, free))
                except SpecllamaError as e:
                    if not isolate:
                        raise
                    yield request.tag, FailedEvent(str(e))
            if not active:
                if pending and not self._cancel:
                    continue
                return
            try:
                yield from self._step(active)
            except SpecllamaError as e:
                if not isolate:
                    raise
                # A failed decode leaves every active sequence's cache out of step: they all fail
                # (and are retried by a rerun); the slots start clean for the next prompts.
                for seq in active:
                    yield seq.tag, FailedEvent(str(e))
                    self._release(seq, free, clean=True)
                active = []
                continue
            for seq in [s for s in active if s.finish]:
                active.remove(seq)
                yield seq.tag, seq.done()
                self._release(seq, free, clean=False)

    def _admit(self, request: Request, free: list[int]) -> SequenceState:
        """Give the request the free slot whose cache shares the longest prefix with its prompt
        (a chat's earlier turns, a batch's common system prompt) and prefill the rest."""
        target, config, prompt = self.target, request.config, list(request.prompt)
        slot = max(free, key=lambda s: (target.common_prefix(prompt, s), -s))
        drafter = self.drafter_for(config)
        verifier = VERIFIERS[config.verify]
        shared = self.acceptance_for(config, drafter)
        acceptance = shared.for_text() if shared else None
        if acceptance:
            acceptance.verify_tokens = verifier.batch_tokens
        summary = Summary(prompt_tokens=len(prompt), drafter=config.drafter if config.drafts else "none")
        t0 = time.perf_counter()
        try:
            summary.reused_tokens = min(target.reuse_prefix(prompt, slot), len(prompt) - 1)
            target.rollback(summary.reused_tokens, slot)
            target.decode(prompt[target.past(slot):-1], logits="none", seq=slot)
            # The draft digests the prompt only once a step may want drafts (a long prompt costs the
            # draft seconds); propose() catches up by itself then. Whether drafts can pay at all is
            # asked every step (the costs are learnt as the run goes), not once here.
            if not isinstance(drafter, NoDrafter) and (acceptance is None or acceptance.choose() > 0):
                drafter.prefill(slot, prompt)
        except SpecllamaError:
            target.clear(slot)
            raise
        free.remove(slot)
        summary.t_prompt = time.perf_counter() - t0
        return SequenceState(slot, request.tag, config, drafter, verifier, acceptance, prompt,
                             np.random.default_rng(config.sampling.seed), summary, StreamDecoder(target.model),
                             StopMatcher(config.stop), time.perf_counter())

    def _release(self, seq: SequenceState, free: list[int], clean: bool) -> None:
        self._cancel_tags.discard(seq.tag)  # a server's tags are never reused: do not keep them all
        seq.drafter.finish(seq.slot, seq.committed)
        if clean:
            self.target.clear(seq.slot)
            seq.drafter.rollback(seq.slot, 0)
        free.append(seq.slot)

    def _step(self, active: list[SequenceState]) -> Iterator[tuple[Hashable, Event]]:
        target, clock, planner = self.target, self.clock, self.planner
        for seq in active:
            if self._cancel or seq.tag in self._cancel_tags:
                seq.finish = "cancelled"
            elif target.n_ctx - target.past(seq.slot) - 1 < 0:  # no cache slot left for [last]
                seq.finish = "context"
        running = [s for s in active if not s.finish]
        if not running:
            return
        t_start = clock()
        llama_before = sum(c.llama_seconds for c in self._timed)
        # --- plan ----------------------------------------------------------------------------
        ks = planner.lengths(running, planner.caps(running, target))
        # --- draft ---------------------------------------------------------------------------
        t_draft_start = clock()
        timed_before = [(d.timed_decodes, d.timed_seconds) for d in self._draft_models]
        proposals = self._draft(running, ks)
        t_draft = clock() - t_draft_start
        planner.cut(running, proposals)
        # --- decode: one target decode for every sequence (per verifier; stairs runs alone) ----
        t_decode_start = clock()
        n_past = {seq.slot: target.past(seq.slot) for seq in running}
        logits: dict[int, np.ndarray] = {}
        for verifier in {id(s.verifier): s.verifier for s in running}.values():
            group = [s for s in running if s.verifier is verifier]
            rows = verifier.decode(target, [(s.slot, s.committed[-1], proposals[s.slot].tokens) for s in group])
            logits.update({s.slot: r for s, r in zip(group, rows)})
        t_decode = clock() - t_decode_start
        # --- judge and commit: both caches keep what was accepted ------------------------------
        verdicts: list[Verdict] = []
        for seq, k in zip(running, ks):
            proposal = proposals[seq.slot]
            verdict = _judge(proposal.tokens, proposal, logits[seq.slot], seq.config, seq.rng)
            seq.verifier.commit(target, seq.slot, n_past[seq.slot], seq.committed[-1], proposal.tokens, verdict.n_accepted)
            if proposal.tokens:
                seq.drafter.rollback(seq.slot, len(seq.committed) + verdict.n_accepted)
            if k:  # asked this step: it hears what was sent of its proposal, nothing included
                seq.drafter.observe(seq.slot, proposal, verdict.n_accepted)
            if seq.acceptance:
                seq.acceptance.observe(len(proposal.tokens), verdict.n_accepted)
            verdicts.append(verdict)
        # --- what the step cost, as it was paid -------------------------------------------------
        t_step = clock() - t_start
        rows = sum(s.verifier.batch_tokens(len(proposals[s.slot].tokens)) for s in running)
        self.costs.record_step(rows, t_step - t_draft)
        for d, (decodes, seconds) in zip(self._draft_models, timed_before):
            self.costs.record_draft(d.timed_decodes - decodes, d.timed_seconds - seconds)
        sources = [proposals[s.slot].source if proposals[s.slot].tokens else "" for s in running]
        planner.judge_step(running, sources, [v.n_accepted + 1 for v in verdicts], t_step)
        # --- emit ----------------------------------------------------------------------------
        t_python = t_step - t_draft - t_decode
        t_llama = sum(c.llama_seconds for c in self._timed) - llama_before
        for seq, k, verdict, source in zip(running, ks, verdicts, sources):
            draft = proposals[seq.slot].tokens
            events = seq.emit(draft, verdict, source, target.model)
            step = StepEvent(k, len(draft), verdict.n_accepted, t_draft, t_decode, t_python, source, rows, t_llama)
            seq.summary.record(step)
            for event in events:
                yield seq.tag, event
            yield seq.tag, step

    def _draft(self, running: list[SequenceState], ks: list[int]) -> dict[int, Proposal]:
        """Each drafter proposes once for all of its sequences; returns the proposals by slot."""
        proposals: dict[int, Proposal] = {seq.slot: Proposal([]) for seq in running}
        by_drafter: dict[int, list[tuple[SequenceState, int]]] = {}
        for seq, k in zip(running, ks):
            if k:
                by_drafter.setdefault(id(seq.drafter), []).append((seq, k))
        for group in by_drafter.values():
            drafter = group[0][0].drafter
            asks = [DraftRequest(seq.slot, seq.committed, k, seq.config, seq.rng,
                                 seq.realised.avoid() if seq.config.k == AUTO else frozenset()) for seq, k in group]
            for (seq, k), proposal in zip(group, drafter.propose(asks)):
                proposal.tokens = proposal.tokens[:k]
                proposal.source = proposal.source or drafter.name
                proposals[seq.slot] = proposal
        return proposals


def _next_request(requests, idle: bool):
    """The next request, None when a live source has none waiting, CLOSED at the end. A live source
    (RequestQueue) blocks only while the engine is idle; an iterator's end is the job's end."""
    poll = getattr(requests, "poll", None)
    if poll is not None:
        return poll(block=idle)
    return next(requests, CLOSED)


def _judge(draft: list[int], proposal: Proposal, logits: np.ndarray, config: GenerationConfig,
           rng: np.random.Generator) -> Verdict:
    if config.sampling.greedy:
        return verify_greedy(draft, logits)
    p = probabilities(logits, config.sampling)
    q = proposal.q[:len(draft)] if proposal.q is not None else None
    return verify_sampling(draft, q, p, rng)
