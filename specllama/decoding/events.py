"""What a generation tells its consumer: token and step events, a final event, the summary.

`Engine.generate` returns a `Generation`: iterate it for events (TokenEvent, StepEvent, then one
DoneEvent), then read `.summary`. Every event that carries text has a `.text`; concatenated they
are the output (the DoneEvent releases what was held back: bytes of a split character, the start
of a possible stop string).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Literal, Sequence, Union

from specllama.decoding.cancel import CancelHandle

Origin = Literal["draft", "target", "bonus"]


@dataclass(frozen=True)
class TokenLogprobs:
    logprob: float  # the target's log-probability of the token, from its raw logits
    top: tuple[tuple[int, float], ...] = ()  # the most likely tokens there: (id, logprob), best first


@dataclass(frozen=True)
class TokenEvent:
    id: int
    text: str  # may be "" while bytes of a character or a possible stop string are held back
    origin: Origin  # draft: proposed and accepted; target: the target's correction; bonus: after all K accepted
    source: str = ""  # for a draft token, the drafter that proposed it ("model", "lookup", ...)
    logprobs: TokenLogprobs | None = None  # when the request asked for them (GenerationConfig.logprobs)


@dataclass(frozen=True)
class StepEvent:
    k: int  # drafts asked for
    drafted: int  # drafts proposed
    accepted: int
    t_draft: float
    t_verify: float
    t_python: float
    source: str = ""  # the drafter whose proposal was verified ("" when nothing was drafted)
    batch_tokens: int = 0  # tokens in the target's decode this step, every sequence's included
    t_llama: float = 0.0  # of the step's time, what llama_decode itself took (target and draft)
    sources: tuple[str, ...] = ()  # per drafted token, when they came from several sources (a grammar's forced tokens)

    @property
    def seconds(self) -> float:
        """The whole step: asking the drafters, the decode and verification, the engine's Python."""
        return self.t_draft + self.t_verify + self.t_python

    def by_source(self) -> dict[str, tuple[int, int]]:
        """Drafts verified and accepted, per source."""
        if not self.drafted:
            return {}
        if not self.sources:
            return {self.source: (self.drafted, self.accepted)}
        counts: dict[str, tuple[int, int]] = {}
        for i, source in enumerate(self.sources[:self.drafted]):
            drafted, accepted = counts.get(source, (0, 0))
            counts[source] = (drafted + 1, accepted + int(i < self.accepted))
        return counts


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
    reused_from: str = ""  # where the reused tokens came from beyond the slot: "memory" or "disk" (prompt cache)
    tokens: int = 0
    text: str = ""
    finish_reason: str = ""  # stop (end of generation), stop_string, length, context, cancelled
    stop_string: str = ""  # under finish stop_string: which of the request's stop strings matched
    drafter: str = "none"  # the drafter the request named
    # seconds of the prompt's own work (its cache restored, its chunks decoded): between its chunks
    # the other requests' steps run, which are theirs (decoding/prefill.py)
    t_prompt: float = 0.0
    t_generate: float = 0.0  # from the first step it took part in to its end
    steps: int = 0
    k_total: int = 0  # sum of the K asked for each step (differs from the request's k under -k auto)
    drafted: int = 0
    accepted: int = 0
    t_draft: float = 0.0
    t_verify: float = 0.0
    t_python: float = 0.0
    t_llama: float = 0.0  # inside llama_decode; the steps' other time is the loop's own overhead
    drafted_at: list[int] = field(default_factory=list)  # per draft position: how often drafted
    accepted_at: list[int] = field(default_factory=list)  # ... and accepted
    drafted_by: dict[str, int] = field(default_factory=dict)  # per drafter (source): drafts verified
    accepted_by: dict[str, int] = field(default_factory=dict)  # ... and accepted

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.t_generate if self.t_generate > 0 else 0.0

    @property
    def per_position(self) -> list[float]:
        return [a / d if d else 0.0 for a, d in zip(self.accepted_at, self.drafted_at)]

    def add(self, other: "Summary") -> None:
        """Pool another generation's step statistics into this one."""
        for name in ("steps", "k_total", "drafted", "accepted", "tokens", "t_generate", "t_draft", "t_verify", "t_python",
                     "t_llama"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self._count_positions(other.drafted_at, other.accepted_at)
        for source, n in other.drafted_by.items():
            self.drafted_by[source] = self.drafted_by.get(source, 0) + n
            self.accepted_by[source] = self.accepted_by.get(source, 0) + other.accepted_by.get(source, 0)

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
        self.t_llama += step.t_llama
        self._count_positions([1] * step.drafted, [int(i < step.accepted) for i in range(step.drafted)])
        for source, (drafted, accepted) in step.by_source().items():
            self.drafted_by[source] = self.drafted_by.get(source, 0) + drafted
            self.accepted_by[source] = self.accepted_by.get(source, 0) + accepted


@dataclass(frozen=True)
class DoneEvent:
    text: str  # held-back text released at the end ("" when nothing was held)
    summary: Summary


@dataclass(frozen=True)
class FailedEvent:
    """A request of Engine.run_many that could not be generated (its prompt does not fit, or a
    decode failed); the other requests go on."""

    message: str


Event = Union[TokenEvent, StepEvent, DoneEvent, FailedEvent]


class Generation:
    """One generation: iterate it for events, then read `.summary` (or call `drain()`);
    `cancel()` (from any thread) stops it after the current step, with finish_reason "cancelled"."""

    def __init__(self, events: Iterator[Event], cancel: CancelHandle | None = None):
        self._events = events
        self._summary: Summary | None = None
        self.handle = cancel or CancelHandle()

    def cancel(self) -> None:
        self.handle.cancel()

    def __iter__(self) -> Iterator[Event]:
        for event in self._events:
            if isinstance(event, DoneEvent):
                self._summary = event.summary
            yield event

    @property
    def summary(self) -> Summary:
        if self._summary is None:
            raise RuntimeError("the generation has not finished: iterate it (or call drain()) first")
        return self._summary

    def drain(self) -> Summary:
        """Run to the end, discarding events; returns the summary."""
        for _ in self:
            pass
        return self.summary

    def tokens(self) -> tuple[list[TokenEvent], Summary]:
        """Run to the end, keeping the token events (tests and the benchmark compare them)."""
        tokens = [e for e in self if isinstance(e, TokenEvent)]
        return tokens, self.summary
