"""The speculative step loop, as a scheduler of sequences: one loop for every mode.

Each active request holds a slot (a KV-cache sequence of the target, and of the draft model).
A step reads as its phases, the way gpt-fast's `speculative_decode` does, over all of them:
  plan    - how many drafts each sequence gets, from the machine's costs (batch_plan.py);
  draft   - each drafter proposes for all of its sequences at once;
  verify  - ONE target decode of [last] + drafts of every sequence (own positions and sequence
            id); each sequence's drafts are accepted by greedy match or rejection sampling;
  commit  - each sequence's caches keep what it accepted (both rollbacks side by side);
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
from dataclasses import dataclass, field
from typing import Hashable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from specllama.decoding.adaptive_k import AdaptiveK
from specllama.decoding.batch_plan import LengthChoice, Ratio, choose_lengths, choose_parallel
from specllama.decoding.drafters import Drafter, DraftRequest, NoDrafter, Proposal
from specllama.decoding.events import DoneEvent, Event, FailedEvent, Generation, Origin, StepEvent, Summary, TokenEvent
from specllama.decoding.request import AUTO, K_AUTO_MAX, GenerationConfig
from specllama.decoding.request_queue import CLOSED, RequestQueue
from specllama.decoding.sampling import probabilities
from specllama.decoding.stop import StopMatcher
from specllama.decoding.verifiers import VERIFIERS, Verifier, exact_batch_limit
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


@dataclass
class _Sequence:
    """One request being generated in a slot."""

    slot: int
    tag: Hashable
    config: GenerationConfig
    drafter: Drafter
    verifier: Verifier
    policy: AdaptiveK | None
    may_draft: bool
    committed: list[int]
    rng: np.random.Generator
    summary: Summary
    decoder: StreamDecoder
    stops: StopMatcher
    t_start: float
    pieces: list[str] = field(default_factory=list)
    finish: str = ""


class Engine:
    """A target context and the drafters a request may name.

    `drafters` maps a drafter name to the drafter (the runtime owns them, with their caches);
    `policies` maps it to its -k auto chooser, whose long-run record is kept across generations;
    `cost_ratio` is the machine's T(n)/T(1), for choosing how many sequences share a decode.
    """

    def __init__(self, target, drafters: Mapping[str, Drafter] | None = None,
                 policies: Mapping[str, AdaptiveK] | None = None, cost_ratio: Ratio | None = None):
        self.target = target
        self.drafters: dict[str, Drafter] = {"none": NoDrafter(), **(drafters or {})}
        self.policies: dict[str, AdaptiveK] = dict(policies or {})
        self.cost_ratio = cost_ratio
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
        can leave a cache out of step with its token list; a benchmark run must not inherit one)."""
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

    def policy_for(self, config: GenerationConfig, drafter: Drafter) -> AdaptiveK | None:
        # A drafter that knows how sure it is per token (sizes_itself) cuts its own draft under
        # -k auto; the engine only gives it a cap.
        if config.k != AUTO or isinstance(drafter, NoDrafter) or getattr(drafter, "sizes_itself", False):
            return None
        policy = self.policies.get(drafter.name)
        if policy is None:
            raise SpecllamaError("-k auto needs this machine's cost curve: load the runtime with auto_k")
        return policy

    def _exact_rows(self) -> int | None:
        """How many rows one decode may hold in exact mode (verifiers.exact_batch_limit); None otherwise."""
        return exact_batch_limit(self.target) if getattr(self.target, "exact", False) else None

    def parallelism(self, parallel: int | str) -> int:
        """How many sequences to run at once: a number, or "auto": the N that makes the most
        tokens per second on the measured cost curve (capped by the slots and exact mode)."""
        exact_rows = self._exact_rows()
        most = self.slots if exact_rows is None else min(self.slots, exact_rows)
        if parallel == AUTO:
            return choose_parallel(self.cost_ratio, most) if self.cost_ratio else 1
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
        self.policy_for(request.config, drafter)
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
        feeds requests that arrive while it runs (a server): they join between steps."""
        self._cancel, self._cancel_tags = False, set()
        source = requests if hasattr(requests, "poll") else iter(requests)
        return self._schedule(source, self.parallelism(parallel), isolate=True)

    # --- the loop ----------------------------------------------------------------------------

    def _schedule(self, requests: Iterator[Request], n_parallel: int, isolate: bool) -> Iterator[tuple[Hashable, Event]]:
        active: list[_Sequence] = []
        free = list(range(self.slots))
        pending = True
        while True:
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
                yield seq.tag, self._done(seq)
                self._release(seq, free, clean=False)

    def _admit(self, request: Request, free: list[int]) -> _Sequence:
        """Give the request the free slot whose cache shares the longest prefix with its prompt
        (a chat's earlier turns, a batch's common system prompt) and prefill the rest."""
        target, config, prompt = self.target, request.config, list(request.prompt)
        slot = max(free, key=lambda s: (target.common_prefix(prompt, s), -s))
        drafter = self.drafter_for(config)
        verifier = VERIFIERS[config.verify]
        shared = self.policy_for(config, drafter)
        policy = shared.for_text() if shared else None
        if policy:
            policy.verify_tokens = verifier.batch_tokens
        summary = Summary(prompt_tokens=len(prompt), drafter=config.drafter if config.drafts else "none")
        t0 = time.perf_counter()
        try:
            summary.reused_tokens = min(target.reuse_prefix(prompt, slot), len(prompt) - 1)
            target.rollback(summary.reused_tokens, slot)
            target.decode(prompt[target.past(slot):-1], logits="none", seq=slot)
            # With -k auto, a drafter that cannot pay even at 100 % acceptance is never used at all.
            may_draft = not isinstance(drafter, NoDrafter) and (policy.best_possible_rate() > 1.0 if policy else True)
            # Under -k auto the draft digests the prompt only once a step wants drafts (a long
            # prompt costs the draft seconds); propose() catches up by itself then.
            if may_draft and (policy is None or policy.choose() > 0):
                drafter.prefill(slot, prompt)
        except SpecllamaError:
            target.clear(slot)
            raise
        free.remove(slot)
        summary.t_prompt = time.perf_counter() - t0
        return _Sequence(slot, request.tag, config, drafter, verifier, policy, may_draft, prompt,
                         np.random.default_rng(config.sampling.seed), summary, StreamDecoder(target.model),
                         StopMatcher(config.stop), time.perf_counter())

    def _release(self, seq: _Sequence, free: list[int], clean: bool) -> None:
        seq.drafter.finish(seq.slot, seq.committed)
        if clean:
            self.target.clear(seq.slot)
            seq.drafter.rollback(seq.slot, 0)
        free.append(seq.slot)

    def _done(self, seq: _Sequence) -> DoneEvent:
        tail = "" if seq.finish == "stop_string" else seq.stops.flush(seq.decoder.flush())
        seq.pieces.append(tail)
        summary = seq.summary
        summary.t_generate = time.perf_counter() - seq.t_start
        summary.finish_reason = seq.finish
        summary.text = "".join(seq.pieces)
        return DoneEvent(tail, summary)

    def _step(self, active: list[_Sequence]) -> Iterator[tuple[Hashable, Event]]:
        target = self.target
        for seq in active:
            if self._cancel or seq.tag in self._cancel_tags:
                seq.finish = "cancelled"
            elif target.n_ctx - target.past(seq.slot) - 1 < 0:  # no cache slot left for [last]
                seq.finish = "context"
        running = [s for s in active if not s.finish]
        if not running:
            return
        # --- plan + draft ----------------------------------------------------------------------
        t_a = time.perf_counter()
        ks = self._plan(running)
        proposals: dict[int, Proposal] = {}
        by_drafter: dict[int, list[tuple[_Sequence, int]]] = {}
        for seq, k in zip(running, ks):
            proposals[seq.slot] = Proposal([])
            if k:
                by_drafter.setdefault(id(seq.drafter), []).append((seq, k))
        for group in by_drafter.values():
            drafter = group[0][0].drafter
            asks = [DraftRequest(seq.slot, seq.committed, k, seq.config, seq.rng) for seq, k in group]
            for (seq, k), proposal in zip(group, drafter.propose(asks)):
                proposal.tokens = proposal.tokens[:k]
                proposal.source = proposal.source or drafter.name
                proposals[seq.slot] = proposal
        if len(running) > 1 and self.cost_ratio is not None:
            self._trim_to_batch(running, proposals)
        # --- verify: one decode for every sequence (per verifier; stairs runs alone) ------------
        t_b = time.perf_counter()
        n_past = {seq.slot: target.past(seq.slot) for seq in running}
        logits: dict[int, np.ndarray] = {}
        for verifier in {id(s.verifier): s.verifier for s in running}.values():
            group = [s for s in running if s.verifier is verifier]
            rows = verifier.decode(target, [(s.slot, s.committed[-1], proposals[s.slot].tokens) for s in group])
            logits.update({s.slot: r for s, r in zip(group, rows)})
        t_c = time.perf_counter()
        batch_tokens = sum(s.verifier.batch_tokens(len(proposals[s.slot].tokens)) for s in running)
        for seq, k in zip(running, ks):
            proposal = proposals[seq.slot]
            draft = proposal.tokens
            verdict = _judge(draft, proposal, logits[seq.slot], seq.config, seq.rng)
            # --- commit: both caches keep what was accepted --------------------------------------
            seq.verifier.commit(target, seq.slot, n_past[seq.slot], seq.committed[-1], draft, verdict.n_accepted)
            if draft:
                seq.drafter.rollback(seq.slot, len(seq.committed) + verdict.n_accepted)
                seq.drafter.observe(seq.slot, proposal, verdict.n_accepted)
            if seq.policy:
                seq.policy.observe(len(draft), verdict.n_accepted)
            # --- emit ----------------------------------------------------------------------------
            events = self._emit(seq, draft, verdict, proposal.source)
            step = StepEvent(k, len(draft), verdict.n_accepted, t_b - t_a, t_c - t_b, time.perf_counter() - t_c,
                             proposal.source if draft else "", batch_tokens)
            seq.summary.record(step)
            for event in events:
                yield seq.tag, event
            yield seq.tag, step

    def _plan(self, running: list[_Sequence]) -> list[int]:
        """Each sequence's draft length: fixed by its request, or chosen (-k auto) together with
        the others' from the machine's cost curve (batch_plan.py), within what its context, its
        max tokens and exact mode allow."""
        target = self.target
        caps = []
        for seq in running:
            cap = 0
            if seq.may_draft:
                cap = min(seq.verifier.max_k(target, seq.slot), seq.config.max_tokens - seq.summary.tokens - 1)
                most = seq.policy.k_max if seq.policy else K_AUTO_MAX if seq.config.k == AUTO else int(seq.config.k)
                cap = max(0, min(cap, most))
            caps.append(cap)
        exact_rows = self._exact_rows()
        if not any(seq.policy for seq in running):
            return _fit_rows(caps, exact_rows)
        if len(running) == 1:  # -k auto on its own: its chooser knows stairs' costs too
            return [min(running[0].policy.choose(), caps[0]) if caps[0] else 0]
        choices = [LengthChoice(seq.policy.fast if seq.policy else [1.0] * cap,
                                seq.policy.draft_cost if seq.policy else 0.0, cap)
                   for seq, cap in zip(running, caps)]
        ratio = running[0].policy.verify_ratio if self.cost_ratio is None else self.cost_ratio
        ks = choose_lengths(choices, ratio, max_tokens=exact_rows)
        # A fixed-K request keeps its K: the plan only sizes the -k auto ones around it.
        return _fit_rows([cap if seq.policy is None else k for seq, cap, k in zip(running, caps, ks)], exact_rows)

    def _trim_to_batch(self, running: list[_Sequence], proposals: dict[int, Proposal]) -> None:
        """Drafters that size their own drafts (suffix, auto) did so as if their sequence were
        decoded alone; in a batch a draft row also delays every other sequence's token, so their
        drafts are cut jointly on the batch's curve, by the confidence each token came with. The
        others' lengths stay as planned. Measured on bench/prompts_similar.jsonl at --parallel
        auto (16 slots) before this: drafting made the job 0.89-1.05x of plain decoding's."""
        choices, fixed = [], []
        for seq in running:
            proposal = proposals[seq.slot]
            n = len(proposal.tokens)
            known = list(proposal.confidence or (seq.policy.fast if seq.policy else []))[:n]
            trimmable = seq.config.k == AUTO and getattr(seq.drafter, "sizes_itself", False) and len(known) == n > 0
            # A fixed draft's tokens count with what is known of them (an unknown one: not at all).
            choices.append(LengthChoice(known + [0.0] * (n - len(known)), 0.0, n))
            fixed.append(None if trimmable else n)
        if all(f is not None for f in fixed):
            return
        for seq, k in zip(running, choose_lengths(choices, self.cost_ratio, max_tokens=self._exact_rows(), fixed=fixed)):
            proposals[seq.slot].tokens = proposals[seq.slot].tokens[:k]

    def _emit(self, seq: _Sequence, draft: list[int], verdict: Verdict, source: str) -> list[TokenEvent]:
        model, summary = self.target.model, seq.summary
        new = draft[:verdict.n_accepted] + [verdict.token]
        origins: list[Origin] = ["draft"] * verdict.n_accepted + ["bonus" if verdict.bonus and draft else "target"]
        events: list[TokenEvent] = []
        for token, origin in zip(new, origins):
            if model.is_eog(token):
                seq.finish = "stop"
                break
            seq.committed.append(token)
            summary.tokens += 1
            text, hit = seq.stops.feed(seq.decoder.feed(token))
            seq.pieces.append(text)
            events.append(TokenEvent(token, text, origin, source if origin == "draft" else ""))
            if hit:
                seq.finish = "stop_string"
            elif summary.tokens >= seq.config.max_tokens:
                seq.finish = "length"
            if seq.finish:
                break
        return events


def _next_request(requests, idle: bool):
    """The next request, None when a live source has none waiting, CLOSED at the end. A live source
    (RequestQueue) blocks only while the engine is idle; an iterator's end is the job's end."""
    poll = getattr(requests, "poll", None)
    if poll is not None:
        return poll(block=idle)
    return next(requests, CLOSED)


def _fit_rows(ks: list[int], limit: int | None) -> list[int]:
    """Trim draft lengths, longest first, until the batch ([last] + drafts each) fits `limit`."""
    ks = list(ks)
    if limit is None:
        return ks
    while ks and sum(k + 1 for k in ks) > limit and max(ks) > 0:
        ks[ks.index(max(ks))] -= 1
    return ks


def _judge(draft: list[int], proposal: Proposal, logits: np.ndarray, config: GenerationConfig,
           rng: np.random.Generator) -> Verdict:
    if config.sampling.greedy:
        return verify_greedy(draft, logits)
    p = probabilities(logits, config.sampling)
    q = proposal.q[:len(draft)] if proposal.q is not None else None
    return verify_sampling(draft, q, p, rng)
