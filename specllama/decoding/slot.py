"""One request being generated in an engine slot: everything that is that request's own, and how
a judged step lands in it.

The engine's step decides (plan, draft, decode, judge); a slot keeps what was decided: the
committed tokens, the text pieces, the summary, the stop check, and the request itself with its
cancel handle and its draft policy (which holds its record of how its drafts fared: acceptance,
realised speed). The drafters' caches for the slot are kept by the drafters under its index (the
KV cache sequence id), like the target's: they outlive a request, so the next request in that
slot (a chat's next turn) reuses them.
"""

from __future__ import annotations

import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Hashable

import numpy as np

from specllama.decoding.drafters import Proposal
from specllama.decoding.events import DoneEvent, Origin, Summary, TokenEvent, TokenLogprobs
from specllama.decoding.grammar import Guide
from specllama.decoding.policy import DraftPolicy
from specllama.decoding.position_streams import PositionStreams
from specllama.decoding.prefill import Prefill
from specllama.decoding.request import GenerationConfig, Request
from specllama.decoding.stop import StopMatcher
from specllama.decoding.verifiers import Verifier
from specllama.decoding.verify import Verdict
from specllama.errors import SpecllamaError
from specllama.llama.model import StreamDecoder

FAILED = "failed"  # a slot's finish when its own request failed mid-generation (slot.fault says why)
FAULT_CHARS = 300  # an unexpected error's text in a client's answer is cut here: the reason, not a dump


@dataclass
class Slot:
    index: int  # the KV cache sequence id, in the target's context and every drafter's
    request: Request
    policy: DraftPolicy
    verifier: Verifier
    committed: list[int]
    rng: np.random.Generator
    summary: Summary
    decoder: StreamDecoder
    stops: StopMatcher
    t_start: float  # when it began generating (after its prompt): its tokens/s run from here
    pieces: list[str] = field(default_factory=list)
    finish: str = ""
    guide: Guide | None = None  # the request's grammar (grammar.py), when it has a constraint
    fault: str = ""  # why this request failed mid-generation (finish FAILED): its client's error message
    prefill: Prefill | None = None  # the prompt still being decoded (prefill.py); None once it steps
    # Where the target's token at each position is drawn from when sampling (position_streams.py); the
    # drafters' own draws come from `rng`. None when greedy.
    streams: PositionStreams | None = None

    @property
    def tag(self) -> Hashable:
        return self.request.tag

    @property
    def config(self) -> GenerationConfig:
        return self.request.config

    @property
    def ids_only(self) -> bool:
        """Whether verification needs only each verified row's argmax id, not the row: greedy, with
        nothing else reading the rows (a grammar's mask, logprobs). Saves copying 152k floats a row
        out of llama.cpp and a second pass over them."""
        return self.config.sampling.greedy and self.guide is None and self.config.logprobs is None

    def fail(self, error: BaseException) -> None:
        """This request alone has failed (its grammar hit a limit, a bug in its own state): it
        ends with an error after this step; the other slots go on."""
        if not self.fault:
            self.fault = fault_message(error)
            if not isinstance(error, SpecllamaError):  # a bug: its traceback for the log, its first line for the client
                traceback.print_exception(error, file=sys.stderr)
        self.finish = FAILED

    def emit_guarded(self, sent: Proposal, verdict: Verdict, model, rows: np.ndarray | None = None) -> list[TokenEvent]:
        """emit(), unless the request has failed; a failure while emitting fails it (its events
        of this step are dropped: the client gets the error, not a token its grammar never allowed)."""
        if self.fault:
            self.finish = FAILED
            return []
        try:
            return self.emit(sent, verdict, model, rows)
        except Exception as e:
            self.fail(e)
            return []

    def emit(self, sent: Proposal, verdict: Verdict, model, rows: np.ndarray | None = None) -> list[TokenEvent]:
        """Commit the step's new tokens (accepted drafts, then the target's own) as text events,
        stopping at the end of generation, a stop string, a completed grammar or the length limit.
        `rows`: the target's logits the step was judged on (row i at the i-th new token), read for
        logprobs when asked."""
        summary, draft = self.summary, sent.tokens
        new = [*draft[:verdict.n_accepted], verdict.token]
        origins: list[Origin] = ["draft"] * verdict.n_accepted + ["bonus" if verdict.bonus and draft else "target"]
        events: list[TokenEvent] = []
        for i, (token, origin) in enumerate(zip(new, origins)):
            if model.is_eog(token):
                self.finish = "stop"
                break
            self.committed.append(token)
            summary.tokens += 1
            piece = self.decoder.feed(token)
            # Stop strings apply outside what a grammar holds: a stop inside a JSON answer would cut
            # it into invalid JSON (issue 41: `stop: ["\""]` gave `{`); the grammar ends that part.
            held = self.guide is not None and self.guide.active and not self.guide.complete
            text, hit = (self.stops.pass_through(piece), False) if held else self.stops.feed(piece)
            self.pieces.append(text)
            logprobs = token_logprobs(rows[i], token, self.config.logprobs) if rows is not None and \
                self.config.logprobs is not None else None
            events.append(TokenEvent(token, text, origin, sent.source_of(i) if origin == "draft" else "", logprobs))
            if self.guide is not None:
                self.guide.advance(token)
            if hit:
                self.finish = "stop_string"
                summary.stop_string = self.stops.matched
            elif self.guide is not None and self.guide.complete:
                self.finish = "stop"  # the grammar admits nothing more: the answer is whole
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


def fault_message(error: BaseException) -> str:
    """What the failed request's client is told: a SpecllamaError's own line; for anything else
    (a bug, a library's RuntimeError) its type and first line, cut short."""
    if isinstance(error, SpecllamaError):
        return str(error)
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    text = "internal error while generating this answer (" + text + ")"
    return text if len(text) <= FAULT_CHARS else text[:FAULT_CHARS - 1] + "…"


def token_logprobs(row: np.ndarray, token: int, top: int) -> TokenLogprobs:
    """The target's own log-probability of `token` at this position (the row it was verified on,
    so an accepted draft gets its real value), and the `top` most likely tokens there."""
    row = row.astype(np.float64)
    logz = row.max() + np.log(np.exp(row - row.max()).sum())
    best = np.argpartition(-row, top)[:top] if top else np.array([], dtype=np.int64)
    best = best[np.argsort(-row[best], kind="stable")]
    return TokenLogprobs(float(row[token] - logz), tuple((int(t), float(row[t] - logz)) for t in best))
