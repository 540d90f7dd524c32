"""The speculative step loop, as a scheduler of sequences: one loop for every mode.

Each active request holds a slot (a KV-cache sequence of the target, and of the draft model).
A step reads as its phases, the way gpt-fast's `speculative_decode` does, over all of them:
  plan    - each request's draft policy (policy/) asks for a draft: a drafter and at most how many
            tokens, on the costs this engine's own steps have shown (cost/online.py) and its text's
            acceptance; the planner (planner.py) settles the lengths for the batch;
  draft   - each drafter proposes for all of its sequences at once, with its confidence per token
            where it has one; a policy may then ask another drafter (`--drafter auto`); each policy
            cuts what it sends, and the planner cuts jointly in a batch;
  decode  - ONE target decode of [last] + drafts of every sequence (own positions and sequence id);
  judge   - each sequence's drafts accepted by greedy match or rejection sampling;
  commit  - each sequence's caches keep what it accepted (both rollbacks side by side);
  emit    - each sequence's new tokens become token events (whose texts concatenate to the output),
            cut at the end of generation, a stop string, a finished grammar or max_tokens;
  learn   - one StepOutcome per request (outcome.py, with what was emitted) reaches every learner in
            one place: the step's time, as it was paid, feeds the cost estimate; the verified
            drafter calibrates; the request's policy updates its acceptance and realised speed;
            then the token events and a step event per sequence are yielded.
A finished request frees its slot and the next waiting prompt is admitted at once (continuous
batching). A prompt's prefill is its own decodes, a chunk between steps (prefill.py), not rows
riding in a step's batch: its cache then holds exactly what a lone run's holds (exact mode's promise
that the text does not depend on N), and on a CPU a prefill batch of hundreds of tokens is
compute-bound anyway, so the few rows a step would add to it are saved once per prompt, not once per
step; the requests already generating go on between its chunks.

`generate` (chat, run, bench) is the case of one request and one slot; plain decoding is K = 0.
Every request carries its own cancel handle (cancel.py): stopping one never touches another.
"""

from __future__ import annotations

import sys
import time
import traceback
from dataclasses import replace
from typing import Callable, Hashable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from specllama.decoding.acceptance import PositionAcceptance
from specllama.decoding.cancel import CancelHandle
from specllama.decoding.cost.model import choose_parallel
from specllama.decoding.cost.online import StepCosts
from specllama.decoding.drafters import Drafter, DraftRequest, Proposal
from specllama.decoding.events import DoneEvent, Event, FailedEvent, Generation, StepEvent, Summary, TokenEvent
from specllama.decoding.grammar import GrammarFault, guide_drafts, guide_for
from specllama.decoding.outcome import StepOutcome
from specllama.decoding.planner import Planner
from specllama.decoding.policy import Ask, DraftPolicy, EngineRecord, PolicyKit, policy_for
from specllama.decoding.position_streams import PositionStreams
from specllama.decoding.prefill import PREFILL_CHUNK, Prefill
from specllama.decoding.prepared import LateRecord, Prepared
from specllama.decoding.request import AUTO, GenerationConfig, Request
from specllama.decoding.request_queue import CLOSED, RequestQueue
from specllama.decoding.slot import FAILED, Slot, fault_message
from specllama.decoding.stop import StopMatcher
from specllama.decoding.target import DecodeTarget
from specllama.decoding.target_rows import LazyProbabilities
from specllama.decoding.verifiers import VERIFIERS, exact_rows
from specllama.decoding.verify import Verdict, verify_greedy, verify_sampling
from specllama.errors import ContextOverflowError, SpecllamaError
from specllama.llama.model import StreamDecoder

# Re-exported: most callers want the request and its results from one place.
__all__ = ["Engine", "Request", "GenerationConfig", "Generation", "Summary", "TokenEvent", "StepEvent",
           "DoneEvent", "FailedEvent"]


class Engine:
    """A target context and the drafters a request may use.

    `drafters` maps a drafter name ("suffix", "model") to the drafter (the runtime owns them, with
    their caches); `acceptance` maps a drafter without its own confidence (the draft model) to its
    long-run per-position acceptance record, kept across generations; `costs` is what steps cost on
    this machine, learnt from every step this engine runs (the runtime seeds it from the cache);
    `clock` times the steps (tests pass a fake backend's clock).
    """

    def __init__(self, target: DecodeTarget, drafters: Mapping[str, Drafter] | None = None,
                 acceptance: Mapping[str, PositionAcceptance] | None = None, costs: StepCosts | None = None,
                 clock: Callable[[], float] = time.perf_counter):
        self.target = target
        self.drafters: dict[str, Drafter] = dict(drafters or {})
        self.acceptance: dict[str, PositionAcceptance] = dict(acceptance or {})
        self.costs = costs or StepCosts()
        self.clock = clock
        self.planner = Planner(self.costs, exact_rows(self.target))
        self.ends = frozenset(target.model.eog_ids)  # no draft is sent past one (Proposal.through_end)
        self.record = EngineRecord()
        # What a policy's kit holds of the acceptance records: views taken on the engine thread (prepared.py).
        self._late_records = {name: LateRecord(record) for name, record in self.acceptance.items()}
        # Contexts whose time inside llama_decode a step reports (the target's, the draft model's).
        contexts = [target] + [c for d in self.drafters.values() for c in d.contexts]
        self._timed = list({id(c): c for c in contexts}.values())
        # A unified cache lends its extra sequences to a verifier as scratch (stairs): one slot.
        self.slots = 1 if target.unified else target.n_seq_max
        # Prefixes kept beyond the slots (runtime/prompt_cache.py, `serve`): admit() may restore one
        # into the slot before its prefix is reused; prefilled() may keep the prompt after it.
        self.prompt_cache = None

    def reset(self) -> None:
        """Forget every cache: the next generation starts from an empty context (a failed decode
        can leave a cache out of step with its token list; a benchmark run must not inherit one).
        What steps cost is kept: it is the machine's, not the text's."""
        self.target.clear()
        for drafter in self.drafters.values():
            drafter.reset()

    def policy_for(self, config: GenerationConfig) -> DraftPolicy:
        """The request's draft policy (policy/registry.py); a SpecllamaError when it names a drafter
        or policy that is not available. Safe off the engine thread: building it reads no record
        a step updates (prepared.py)."""
        kit = PolicyKit(self.drafters, self.costs, self._late_records, VERIFIERS[config.verify], self.record)
        return policy_for(config, kit)

    def parallelism(self, parallel: int | str) -> int:
        """How many sequences to run at once: a number, or "auto": the N that makes the most
        tokens per second on the costs known now (capped by the slots and exact mode)."""
        limit = exact_rows(self.target)
        most = self.slots if limit is None else min(self.slots, limit)
        if parallel == AUTO:
            return choose_parallel(self.costs.ratio, most)
        return max(1, min(int(parallel), most))

    def check(self, request: Request) -> Prepared:
        """Refuse a request that cannot run, before anything is decoded; else the request as the
        engine admits it, its policy built and its grammar compiled (here only: prepared.py). A
        server calls this on its preparing threads: it reads only what no step changes (the
        context's size, the loaded drafters, the model's vocabulary)."""
        if not request.prompt:
            raise SpecllamaError("empty prompt")
        if len(request.prompt) + 1 > self.target.n_ctx:
            raise ContextOverflowError(
                f"the prompt is {len(request.prompt)} tokens but the context holds {self.target.n_ctx} "
                f"(raise --ctx, at most the model's {self.target.model.n_ctx_train}, or shorten the prompt)",
                prompt_tokens=len(request.prompt), n_ctx=self.target.n_ctx)
        policy = self.policy_for(request.config)
        try:  # refuses what cannot be enforced, or what breaks the grammar engine's limits at its first steps
            guide = guide_for(request.config.constraint, self.target.model, request.config.drafts)
        except SpecllamaError as e:
            raise e if isinstance(e, GrammarFault) else GrammarFault(str(e)) from None
        VERIFIERS[request.config.verify].check(self.target)
        return Prepared.of(request, policy, guide)

    def generate(self, prompt: Sequence[int], config: GenerationConfig, cancel: CancelHandle | None = None) -> Generation:
        """One request: checks it now (a prompt that cannot fit fails here, before any decoding)
        and returns the generation to iterate (and to cancel, from any thread; a caller that must
        be able to stop it before this returns passes its own handle)."""
        prepared = self.check(Request(list(prompt), config, cancel=cancel or CancelHandle()))
        events = (event for _, event in self._schedule(iter([prepared]), 1, isolate=False))
        return Generation(events, prepared.cancel)

    def run_many(self, requests: Iterable[Request | Prepared] | RequestQueue,
                 parallel: int | str = AUTO) -> Iterator[tuple[Hashable, Event]]:
        """Every request, up to `parallel` at once, as (tag, event) pairs; each request ends with
        a DoneEvent or, when it could not run, a FailedEvent (the others go on). A request already
        checked (a Prepared: a server's) is admitted as it is; any other is checked when its turn
        comes, on this thread. A RequestQueue
        feeds requests that arrive while it runs (a server): they join between steps. Under
        "auto" the number is chosen again as the costs become known. Each request is stopped by
        its own cancel handle."""
        source = requests if hasattr(requests, "poll") else iter(requests)
        return self._schedule(source, parallel, isolate=True)

    # --- the loop ----------------------------------------------------------------------------

    def _schedule(self, requests, parallel: int | str, isolate: bool) -> Iterator[tuple[Hashable, Event]]:
        active: list[Slot] = []
        free = list(range(self.slots))
        pending = True
        while True:
            n_parallel = self.parallelism(parallel)
            while pending and len(active) < n_parallel:
                request = _next_request(requests, idle=not active)
                if request is CLOSED:
                    pending = False
                    break
                if request is None:  # a live source (RequestQueue) with nothing waiting now
                    break
                if request.cancel.cancelled:  # stopped before it was admitted: nothing to decode
                    yield request.tag, DoneEvent("", Summary(prompt_tokens=len(request.prompt), finish_reason="cancelled",
                                                             drafter=request.config.drafter))
                    continue
                try:
                    prepared = request if isinstance(request, Prepared) else self.check(request)
                    active.append(self._admit(prepared, free))
                except Exception as e:  # a bug in one request's admission is that request's alone
                    if not isolate:
                        raise
                    yield request.tag, FailedEvent(fault_message(e))
            if not active:
                if pending:
                    continue
                return
            budget = PREFILL_CHUNK  # prompt tokens decoded before the next step (prefill.py)
            for waiting in [s for s in active if s.prefill is not None and not s.request.cancel.cancelled]:
                if budget <= 0:
                    break
                try:
                    budget -= self._prefill(waiting)
                except Exception as e:  # this prompt's decode failed: its request alone ends
                    active.remove(waiting)
                    free.append(waiting.index)  # cleared; its drafters never started on it
                    if not isolate:
                        raise
                    yield waiting.tag, FailedEvent(fault_message(e))
            try:
                yield from self._step(active)
            except Exception as e:
                if not isolate:
                    raise
                # A failed decode (or a bug no slot can be blamed for) leaves every active
                # sequence's cache out of step: they all fail (and are retried by a rerun); the
                # slots start clean for the next prompts, and the engine goes on serving.
                message = str(e) if isinstance(e, SpecllamaError) else shared_fault(e)
                for slot in active:
                    yield slot.tag, FailedEvent(message)
                    self._release_safely(slot, free)
                active = []
                continue
            for slot in [s for s in active if s.finish]:
                active.remove(slot)
                if slot.finish == FAILED:  # this request's own fault (its grammar, a bug in its slot): it alone ends
                    if not isolate:
                        raise SpecllamaError(slot.fault)
                    yield slot.tag, FailedEvent(slot.fault)
                    self._release_safely(slot, free)
                    continue
                yield slot.tag, slot.done()
                self._release(slot, free, clean=False)

    def _admit(self, request: Prepared, free: list[int]) -> Slot:
        """Give the request the free slot whose cache shares the longest prefix with its prompt
        (a chat's earlier turns, a batch's common system prompt); the rest of the prompt is
        decoded a chunk per loop, between steps (prefill.py)."""
        target, config, prompt, policy = self.target, request.config, list(request.prompt), request.policy
        common = {s: target.common_prefix(prompt, s) for s in free}
        # Ties go to the slot holding least: what another slot holds may be the next prompt's prefix.
        index = max(free, key=lambda s: (common[s], -target.past(s), -s))
        summary = Summary(prompt_tokens=len(prompt), drafter=config.drafter if config.drafts else "none")
        t0 = time.perf_counter()
        try:
            cached = self.prompt_cache.admit(prompt, index) if self.prompt_cache is not None else ""
            # A restored entry changed what the slot holds: only then is its prefix counted again.
            shared = target.common_prefix(prompt, index) if cached else common[index]
            # What follows the shared prefix goes; at least the prompt's last token is decoded again
            # (its logits start the first step).
            target.rollback(min(shared, len(prompt) - 1), index)
        except BaseException:
            target.clear(index)
            raise
        summary.reused_tokens = target.past(index)
        summary.reused_from = cached if summary.reused_tokens else ""
        summary.t_prompt = time.perf_counter() - t0  # its chunks add theirs (_prefill)
        free.remove(index)
        # Even a prompt cached whole goes through _prefill (nothing to decode): the slot's start
        # (checkpoint, drafters, prompt cache) and its failures are handled in one place.
        return Slot(index, request, policy, VERIFIERS[config.verify], prompt,
                    np.random.default_rng(config.sampling.seed), summary, StreamDecoder(target.model),
                    StopMatcher(config.stop), t0, guide=request.guide,
                    prefill=Prefill(prompt[target.past(index):-1]),
                    streams=None if config.sampling.greedy else PositionStreams(config.sampling.seed))

    def _prefill(self, slot: Slot) -> int:
        """The next chunk of the slot's prompt (returns its tokens); once it is all in, the slot
        joins the steps. A failure clears the slot's cache (half a prompt is no prefix to reuse)
        and is raised."""
        try:
            start = time.perf_counter()
            decoded = slot.prefill.advance(self.target, slot.index, self.costs, self.clock)
            slot.summary.t_prompt += time.perf_counter() - start
            if slot.prefill.finished:
                self._prefilled(slot)
            return decoded
        except BaseException:
            self.target.clear(slot.index)
            raise

    def _prefilled(self, slot: Slot) -> None:
        """The whole prompt is in: the slot starts generating at the next step."""
        index, prompt = slot.index, slot.committed
        # A recurrent cache's way back to this prompt, for the next turn of a conversation
        # that changes this one's tail (nothing for an attention cache).
        self.target.checkpoint(index)
        # The policy lets its drafters digest the prompt now, or leaves it to their first
        # proposal (a draft model under -k auto that may not draft at all).
        slot.policy.start(index, prompt)
        if self.prompt_cache is not None:
            self.prompt_cache.prefilled(index)
        slot.t_start = time.perf_counter()
        slot.prefill = None

    def _release(self, slot: Slot, free: list[int], clean: bool) -> None:
        for drafter in slot.policy.drafters:
            drafter.finish(slot.index, slot.committed)
        if clean:
            self.target.clear(slot.index)
            for drafter in slot.policy.drafters:
                drafter.rollback(slot.index, 0)
        free.append(slot.index)

    def _release_safely(self, slot: Slot, free: list[int]) -> None:
        """A failed slot's release: its caches cleared; if even that fails, the slot is given back
        anyway (the next prompt's prefix match finds nothing usable in a cleared or stale cache). The
        second failure goes to stderr (the server's log), as shared_fault's do: the request already has
        its answer, so nobody else would see it."""
        try:
            self._release(slot, free, clean=True)
        except Exception as e:
            traceback.print_exception(e, file=sys.stderr)
            if slot.index not in free:
                free.append(slot.index)
            self.target.clear(slot.index)

    def _step(self, active: list[Slot]) -> Iterator[tuple[Hashable, Event]]:
        target, clock = self.target, self.clock
        for slot in active:
            if slot.request.cancel.cancelled:
                slot.finish = "cancelled"
            elif target.n_ctx - target.past(slot.index) - 1 < 0:  # no cache slot left for [last]
                slot.finish = "context"
        running = [s for s in active if not s.finish and s.prefill is None]
        if not running:
            return
        t_start = clock()
        llama_before = sum(c.llama_seconds for c in self._timed)
        # --- plan ----------------------------------------------------------------------------
        asks = self.planner.asks(running, target)
        # --- draft ---------------------------------------------------------------------------
        t_draft_start = clock()
        timing_before = {name: d.timing() for name, d in self.drafters.items()}
        proposals = self._draft(running, asks)
        t_draft = clock() - t_draft_start
        proposals = self.planner.cut(running, proposals)
        proposals = guide_drafts(running, proposals, target, self.planner.exact_rows)  # a grammar's cut and its forced tokens
        # --- decode: one target decode for every sequence (per verifier) ----------------------
        t_decode_start = clock()
        n_past = {slot.index: target.past(slot.index) for slot in running}
        logits: dict[int, np.ndarray] = {}
        for verifier in {id(s.verifier): s.verifier for s in running}.values():
            group = [s for s in running if s.verifier is verifier]
            rows = verifier.decode(target, [(s.index, s.committed[-1], proposals[s.index].tokens) for s in group],
                                   [s.ids_only for s in group])
            logits.update({s.index: r for s, r in zip(group, rows)})
        t_decode = clock() - t_decode_start
        # --- judge and commit: both caches keep what was accepted ------------------------------
        verdicts: list[Verdict] = []
        t_rollback: dict[int, float] = {}
        for slot in running:
            proposal = proposals[slot.index]
            scored = logits[slot.index]
            if slot.guide is not None and not slot.fault:
                try:
                    scored = slot.guide.mask(proposal.tokens, scored, slot.config.sampling.greedy)
                except Exception as e:  # this request's grammar failed (a limit of llguidance's): it alone fails
                    slot.fail(e)
            verdict = _judge(proposal, scored, slot.config, slot.streams, len(slot.committed))
            t_commit = clock()
            slot.verifier.commit(target, slot.index, n_past[slot.index], slot.committed[-1], proposal.tokens,
                                 verdict.n_accepted)
            rejected = len(proposal.tokens) - verdict.n_accepted
            if rejected:  # what dropping them cost: learnt per rollback (cost/online.py)
                t_rollback[slot.index] = clock() - t_commit
                self.costs.record_rollback(rejected, t_rollback[slot.index])
            if proposal.tokens:
                for drafter in slot.policy.drafters:
                    drafter.rollback(slot.index, len(slot.committed) + verdict.n_accepted)
            verdicts.append(verdict)
        # --- learn: what the step cost, as it was paid, and what each request's drafts did -------
        t_step = clock() - t_start
        rows = sum(s.verifier.batch_tokens(len(proposals[s.index].tokens)) for s in running)
        self.costs.record_step(rows, t_step - t_draft)
        for name, drafter in self.drafters.items():
            decodes, seconds = drafter.timing()
            self.costs.record_draft(decodes - timing_before[name][0], seconds - timing_before[name][1], name)
        t1, alone = self.costs.t1(), len(running) == 1
        # --- emit: each slot commits its new tokens (stopping where a stop string or the limit says) --
        emitted = []
        for slot, verdict in zip(running, verdicts):
            proposal = proposals[slot.index]
            emitted.append(slot.emit_guarded(proposal, verdict, target.model, logits[slot.index]))
        outcomes = [StepOutcome(ask.k, proposals[s.index], v.n_accepted, v.odds, t_step, t1, alone,
                                tuple(e.id for e in events), "".join(e.text for e in events), t_rollback.get(s.index, 0.0),
                                t_draft)
                    for s, ask, v, events in zip(running, asks, verdicts, emitted)]
        self._learn(running, outcomes)
        t_python = t_step - t_draft - t_decode
        t_llama = sum(c.llama_seconds for c in self._timed) - llama_before
        for slot, outcome, verdict, events in zip(running, outcomes, verdicts, emitted):
            step = StepEvent(outcome.asked, outcome.drafted, verdict.n_accepted, t_draft, t_decode, t_python,
                             outcome.source, rows, t_llama, tuple(outcome.sent.sources or ()))
            slot.summary.record(step)
            for event in events:
                yield slot.tag, event
            yield slot.tag, step

    def _learn(self, running: list[Slot], outcomes: list[StepOutcome]) -> None:
        """Every learner reads the step here: the drafter whose proposal was verified calibrates
        itself on it; each request's policy updates its acceptance and realised speed."""
        self.record.drafted = self.record.drafted or any(o.drafted for o in outcomes)
        for slot, outcome in zip(running, outcomes):
            try:
                drafter = self.drafters.get(outcome.source)
                if drafter is not None:
                    drafter.observe(slot.index, outcome)
                slot.policy.observe(outcome)
            except Exception as e:  # one request's policy or calibration failed: that request ends, not the engine
                slot.fail(e)

    def _draft(self, running: list[Slot], asks: list[Ask]) -> dict[int, Proposal]:
        """Each drafter proposes once for all the sequences that asked it (in rounds: a policy may
        ask another drafter after seeing a proposal); returns the proposals by slot."""
        proposals: dict[int, Proposal] = {slot.index: Proposal(()) for slot in running}
        waiting = [(slot, ask) for slot, ask in zip(running, asks) if ask.drafts]
        while waiting:
            by_drafter: dict[int, list[tuple[Slot, Ask]]] = {}
            for slot, ask in waiting:
                by_drafter.setdefault(id(ask.drafter), []).append((slot, ask))
            waiting = []
            for group in by_drafter.values():
                drafter = group[0][1].drafter
                requests = [DraftRequest(slot.index, slot.committed, ask.k, slot.config, slot.rng) for slot, ask in group]
                for (slot, ask), proposal in zip(group, drafter.propose(requests)):
                    proposal = proposal.keep(ask.k).through_end(self.ends)
                    if not proposal.source:
                        proposal = replace(proposal, source=drafter.name)
                    proposal, follow = slot.policy.review(proposal)
                    proposals[slot.index] = proposal
                    if follow is not None and follow.drafts:
                        waiting.append((slot, follow))
        return proposals


def shared_fault(error: BaseException) -> str:
    """A step's failure as every request in it is told: the error's type only, since its text may
    quote one request's content (a grammar, a prompt) and goes to all of them. The traceback goes
    to stderr (the server's log) for whoever debugs it."""
    traceback.print_exception(error, file=sys.stderr)
    return f"a decoding step failed (internal error: {type(error).__name__}); this answer was abandoned"


def _next_request(requests, idle: bool):
    """The next request, None when a live source has none waiting, CLOSED at the end. A live source
    (RequestQueue) blocks only while the engine is idle; an iterator's end is the job's end."""
    poll = getattr(requests, "poll", None)
    if poll is not None:
        return poll(block=idle)
    return next(requests, CLOSED)


def _judge(proposal: Proposal, logits: np.ndarray, config: GenerationConfig, streams: PositionStreams | None,
           position: int) -> Verdict:
    """The step's verdict; sampled: `streams` the request's (a sampled slot always has them), `position`
    where the first judged row lies in the text (its stream's key)."""
    draft = proposal.tokens
    if config.sampling.greedy:
        return verify_greedy(draft, logits)
    p = LazyProbabilities(logits, config.sampling)  # rows past the first rejection are never transformed
    q = proposal.q[:len(draft)] if proposal.q is not None else None
    return verify_sampling(draft, q, p, streams, position)
