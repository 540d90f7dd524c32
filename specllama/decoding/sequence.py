"""One request being generated in an engine slot: its state, and how a judged step lands in it.

The engine's step decides (plan, draft, decode, judge); a sequence keeps what was decided: the
committed tokens, the text pieces, the summary, the stop check, and its record of how its drafts
fared (acceptance for -k auto, realised speed for the planner's check).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Hashable

import numpy as np

from specllama.decoding.acceptance import PositionAcceptance
from specllama.decoding.drafters import Drafter, NoDrafter
from specllama.decoding.events import DoneEvent, Origin, Summary, TokenEvent
from specllama.decoding.realised import RealisedSpeed
from specllama.decoding.request import GenerationConfig
from specllama.decoding.stop import StopMatcher
from specllama.decoding.verifiers import Verifier
from specllama.decoding.verify import Verdict
from specllama.llama.model import StreamDecoder


@dataclass
class SequenceState:
    slot: int
    tag: Hashable
    config: GenerationConfig
    drafter: Drafter
    verifier: Verifier
    acceptance: PositionAcceptance | None  # per-position acceptance, when the planner sizes this drafter's drafts
    committed: list[int]
    rng: np.random.Generator
    summary: Summary
    decoder: StreamDecoder
    stops: StopMatcher
    t_start: float
    realised: RealisedSpeed = field(default_factory=RealisedSpeed)
    pieces: list[str] = field(default_factory=list)
    finish: str = ""

    @property
    def may_draft(self) -> bool:
        """Whether this request drafts at all (its drafter is not plain decoding's)."""
        return not isinstance(self.drafter, NoDrafter)

    def emit(self, draft: list[int], verdict: Verdict, source: str, model) -> list[TokenEvent]:
        """Commit the step's new tokens (accepted drafts, then the target's own) as text events,
        stopping at the end of generation, a stop string or the length limit."""
        summary = self.summary
        new = draft[:verdict.n_accepted] + [verdict.token]
        origins: list[Origin] = ["draft"] * verdict.n_accepted + ["bonus" if verdict.bonus and draft else "target"]
        events: list[TokenEvent] = []
        for token, origin in zip(new, origins):
            if model.is_eog(token):
                self.finish = "stop"
                break
            self.committed.append(token)
            summary.tokens += 1
            text, hit = self.stops.feed(self.decoder.feed(token))
            self.pieces.append(text)
            events.append(TokenEvent(token, text, origin, source if origin == "draft" else ""))
            if hit:
                self.finish = "stop_string"
            elif summary.tokens >= self.config.max_tokens:
                self.finish = "length"
            if self.finish:
                break
        return events

    def done(self) -> DoneEvent:
        """The final event: what was held back (a split character, a possible stop string's
        start) and the summary."""
        tail = "" if self.finish == "stop_string" else self.stops.flush(self.decoder.flush())
        self.pieces.append(tail)
        summary = self.summary
        summary.t_generate = time.perf_counter() - self.t_start
        summary.finish_reason = self.finish
        summary.text = "".join(self.pieces)
        return DoneEvent(tail, summary)
