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

import time
from dataclasses import dataclass, field
from typing import Hashable

import numpy as np

from specllama.decoding.events import DoneEvent, Origin, Summary, TokenEvent, TokenLogprobs
from specllama.decoding.policy import DraftPolicy
from specllama.decoding.request import GenerationConfig, Request
from specllama.decoding.stop import StopMatcher
from specllama.decoding.verifiers import Verifier
from specllama.decoding.verify import Verdict
from specllama.llama.model import StreamDecoder


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
    t_start: float
    pieces: list[str] = field(default_factory=list)
    finish: str = ""

    @property
    def tag(self) -> Hashable:
        return self.request.tag

    @property
    def config(self) -> GenerationConfig:
        return self.request.config

    def emit(self, draft: list[int], verdict: Verdict, source: str, model, rows: np.ndarray | None = None) -> list[TokenEvent]:
        """Commit the step's new tokens (accepted drafts, then the target's own) as text events,
        stopping at the end of generation, a stop string or the length limit. `rows`: the target's
        logits the step was judged on (row i at the i-th new token), read for logprobs when asked."""
        summary = self.summary
        new = draft[:verdict.n_accepted] + [verdict.token]
        origins: list[Origin] = ["draft"] * verdict.n_accepted + ["bonus" if verdict.bonus and draft else "target"]
        events: list[TokenEvent] = []
        for i, (token, origin) in enumerate(zip(new, origins)):
            if model.is_eog(token):
                self.finish = "stop"
                break
            self.committed.append(token)
            summary.tokens += 1
            text, hit = self.stops.feed(self.decoder.feed(token))
            self.pieces.append(text)
            logprobs = token_logprobs(rows[i], token, self.config.logprobs) if rows is not None and \
                self.config.logprobs is not None else None
            events.append(TokenEvent(token, text, origin, source if origin == "draft" else "", logprobs))
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


def token_logprobs(row: np.ndarray, token: int, top: int) -> TokenLogprobs:
    """The target's own log-probability of `token` at this position (the row it was verified on,
    so an accepted draft gets its real value), and the `top` most likely tokens there."""
    row = row.astype(np.float64)
    logz = row.max() + np.log(np.exp(row - row.max()).sum())
    best = np.argpartition(-row, top)[:top] if top else np.array([], dtype=np.int64)
    best = best[np.argsort(-row[best], kind="stable")]
    return TokenLogprobs(float(row[token] - logz), tuple((int(t), float(row[t] - logz)) for t in best))
