"""The speculative step loop: one loop for every mode, plain decoding being K = 0.

Each step: the drafter proposes up to K tokens; the target decodes [last] + drafts in one batch
with logits at every position; verification accepts a prefix and adds one token of the target's
own; the target's cache is rolled back to what was accepted. The generator yields TokenEvents
(whose texts concatenate to the output) and StepEvents, and returns a Summary.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterator, Literal, Sequence

import numpy as np

from specllama.decoding.adaptive_k import AdaptiveK, causal_tokens
from specllama.decoding.drafters import Drafter, NoDrafter, Proposal
from specllama.errors import ContextOverflowError, SpecllamaError
from specllama.llama.context import DecodeContext
from specllama.llama.model import StreamDecoder
from specllama.decoding.sampling import SamplingParams, probabilities
from specllama.decoding.stairs import commit_stairs, decode_stairs, max_stairs_k, stair_tokens
from specllama.decoding.stop import StopMatcher
from specllama.decoding.verify import verify_greedy, verify_sampling

Origin = Literal["draft", "target", "bonus"]


@dataclass(frozen=True)
class TokenEvent:
    id: int  # -1 only for the last event of a generation, carrying text held back until the end
    text: str  # may be "" while bytes of a character or a possible stop string are held back
    origin: Origin  # draft: proposed and accepted; target: the target's correction; bonus: after all K accepted


@dataclass(frozen=True)
class StepEvent:
    k: int  # drafts asked for
    drafted: int  # drafts proposed
    accepted: int
    t_draft: float
    t_verify: float
    t_python: float


@dataclass
class GenerationConfig:
    max_tokens: int = 512
    sampling: SamplingParams = field(default_factory=SamplingParams)
    k: int | str = 4  # draft length, or "auto": chosen each step by the engine's k_policy
    stop: tuple[str, ...] = ()
    verify: Literal["causal", "stairs"] = "causal"


class AcceptanceRates:
    """Rates over counted steps, shared by the final Summary and the TUI's live snapshot."""

    steps: int
    drafted: int
    accepted: int
    k_total: int

    @property
    def mean_k(self) -> float:
        return self.k_total / self.steps if self.steps else 0.0

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None

    @property
    def mean_accepted(self) -> float:
        """Tokens gained per target decode (accepted drafts + the target's own), as vLLM reports."""
        return (self.accepted + self.steps) / self.steps if self.steps else 0.0


@dataclass
class Summary(AcceptanceRates):
    prompt_tokens: int = 0
    reused_tokens: int = 0
    tokens: int = 0
    text: str = ""
    finish_reason: str = ""  # stop (end of generation), stop_string, length, context, cancelled
    t_prompt: float = 0.0
    t_generate: float = 0.0
    steps: int = 0
    k_total: int = 0  # sum of the K asked for each step (differs from config.k under -k auto)
    drafted: int = 0
    accepted: int = 0
    t_draft: float = 0.0
    t_verify: float = 0.0
    t_python: float = 0.0
    drafted_at: list[int] = field(default_factory=list)  # per draft position: how often drafted
    accepted_at: list[int] = field(default_factory=list)  # ... and accepted

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.t_generate if self.t_generate > 0 else 0.0

    @property
    def per_position(self) -> list[float]:
        return [a / d if d else 0.0 for a, d in zip(self.accepted_at, self.drafted_at)]

    def add(self, other: "Summary") -> None:
        """Pool another generation's step statistics into this one."""
        for name in ("steps", "k_total", "drafted", "accepted", "tokens", "t_generate", "t_draft", "t_verify", "t_python"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self._count_positions(other.drafted_at, other.accepted_at)

    def _count_positions(self, drafted_at: Sequence[int], accepted_at: Sequence[int]) -> None:
        while len(self.drafted_at) < len(drafted_at):
            self.drafted_at.append(0)
            self.accepted_at.append(0)
        for i, (d, a) in enumerate(zip(drafted_at, accepted_at)):
            self.drafted_at[i] += d
            self.accepted_at[i] += a

    def record(self, step: StepEvent) -> None:
        self.steps += 1
        self.k_total += step.k
        self.drafted += step.drafted
        self.accepted += step.accepted
        self.t_draft += step.t_draft
        self.t_verify += step.t_verify
        self.t_python += step.t_python
        self._count_positions([1] * step.drafted, [int(i < step.accepted) for i in range(step.drafted)])


class Engine:
    """A target context plus a drafter. Not thread-safe: one generation at a time."""

    def __init__(self, target: DecodeContext, drafter: Drafter | None = None, k_policy: AdaptiveK | None = None):
        self.target = target
        self.drafter = drafter or NoDrafter()
        self.k_policy = k_policy  # used when GenerationConfig.k == "auto"; belongs to the drafter
        self._cancel = False

    def cancel(self) -> None:
        """Ask the running generation to stop after the current step (from any thread)."""
        self._cancel = True

    def generate(self, prompt: Sequence[int], config: GenerationConfig) -> Iterator[TokenEvent | StepEvent]:
        """Yields events; the generator's return value (StopIteration.value) is the Summary.
        Use `run()` to collect everything."""
        target, model = self.target, self.target.model
        if not prompt:
            raise ValueError("empty prompt")
        if len(prompt) + 1 > target.n_ctx:
            raise ContextOverflowError(
                f"the prompt is {len(prompt)} tokens but the context holds {target.n_ctx} "
                f"(raise --ctx, at most the model's {model.n_ctx_train}, or shorten the prompt)")
        self._cancel = False
        policy = self._policy(config)
        params = config.sampling
        stairs = config.verify == "stairs"
        if policy:
            policy.verify_tokens = stair_tokens if stairs else causal_tokens
            policy.new_text()
        if stairs and target.n_seq_max < 2:
            raise SpecllamaError("stairs verification needs a target context with several sequences: "
                                 "load the runtime with verify='stairs'")
        rng = np.random.default_rng(params.seed)
        summary = Summary(prompt_tokens=len(prompt))
        decoder = StreamDecoder(model)
        stops = StopMatcher(config.stop)
        pieces: list[str] = []

        t0 = time.perf_counter()
        # The last prompt token stays out of the cache: every step decodes [last] + drafts.
        summary.reused_tokens = min(target.reuse_prefix(prompt), len(prompt) - 1)
        target.rollback(summary.reused_tokens)
        target.decode(prompt[target.n_past:-1], logits="none")
        fixed_k = config.k if isinstance(config.k, int) else 0
        # With -k auto, a drafter that cannot pay even at 100 % acceptance is never used at all.
        may_draft = not isinstance(self.drafter, NoDrafter) and (
            policy.best_possible_rate() > 1.0 if policy else fixed_k > 0)
        # Under -k auto the draft digests the prompt only once a step wants drafts (a long prompt
        # costs the draft seconds); propose() catches up by itself then.
        if may_draft and (policy is None or policy.choose() > 0):
            self.drafter.prefill(prompt)
        committed = list(prompt)
        summary.t_prompt = time.perf_counter() - t0

        t_start = time.perf_counter()
        finish = ""
        while not finish:
            if self._cancel:
                finish = "cancelled"
                break
            room = target.n_ctx - target.n_past - 1  # cache slots left after [last]
            if room < 0:
                finish = "context"
                break
            wanted = 0 if not may_draft else (policy.choose() if policy else fixed_k)
            k = max(0, min(wanted, room, config.max_tokens - summary.tokens - 1))
            if stairs:
                k = min(k, max_stairs_k(target))

            t_a = time.perf_counter()
            proposal = self.drafter.propose(committed, k, params, rng) if k else Proposal([])
            draft = proposal.tokens[:k]
            t_b = time.perf_counter()
            n_past, last = target.n_past, committed[-1]
            if stairs:
                logits = decode_stairs(target, last, draft)
            else:
                logits = target.decode([last] + draft, logits="all")
            t_c = time.perf_counter()

            if params.greedy:
                verdict = verify_greedy(draft, logits)
            else:
                p = probabilities(logits, params)
                q = proposal.q[:len(draft)] if proposal.q is not None else None
                verdict = verify_sampling(draft, q, p, rng)
            if stairs:
                commit_stairs(target, last, draft, verdict.n_accepted)
            else:
                target.rollback(n_past + 1 + verdict.n_accepted)  # keep [last] + accepted drafts

            new = draft[:verdict.n_accepted] + [verdict.token]
            origins: list[Origin] = ["draft"] * verdict.n_accepted + ["bonus" if verdict.bonus and draft else "target"]
            events: list[TokenEvent] = []
            for token, origin in zip(new, origins):
                if model.is_eog(token):
                    finish = "stop"
                    break
                committed.append(token)
                summary.tokens += 1
                text, hit = stops.feed(decoder.feed(token))
                pieces.append(text)
                events.append(TokenEvent(token, text, origin))
                if hit:
                    finish = "stop_string"
                    break
                if summary.tokens >= config.max_tokens:
                    finish = "length"
                    break
            if policy:
                policy.observe(len(draft), verdict.n_accepted)
            step = StepEvent(k, len(draft), verdict.n_accepted, t_b - t_a, t_c - t_b, time.perf_counter() - t_c)
            summary.record(step)
            yield from events
            yield step

        tail = "" if finish == "stop_string" else stops.flush(decoder.flush())
        if tail:
            pieces.append(tail)
            yield TokenEvent(-1, tail, "target")
        summary.t_generate = time.perf_counter() - t_start
        summary.finish_reason = finish
        summary.text = "".join(pieces)
        return summary

    def _policy(self, config: GenerationConfig) -> AdaptiveK | None:
        if config.k != "auto" or isinstance(self.drafter, NoDrafter):
            return None
        if self.k_policy is None:
            raise SpecllamaError("-k auto needs this machine's cost curve: load the runtime with auto_k")
        return self.k_policy

    def run(self, prompt: Sequence[int], config: GenerationConfig) -> tuple[list[TokenEvent], Summary]:
        events: list[TokenEvent] = []
        gen = self.generate(prompt, config)
        while True:
            try:
                event = next(gen)
            except StopIteration as done:
                return events, done.value
            if isinstance(event, TokenEvent):
                events.append(event)
