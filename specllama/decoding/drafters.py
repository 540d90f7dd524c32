"""Drafters: where the K proposed tokens come from.

A drafter sees the committed sequence (prompt + accepted output, ending with the token the target
has not decoded yet) and proposes up to k tokens that follow it. `q` holds the drafter's
probabilities for each proposed token when it sampled them; None means the proposals were
deterministic (greedy or looked up), which the rejection sampler treats as one-hot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from specllama.llama.context import DecodeContext
from specllama.decoding.sampling import SamplingParams, probabilities, sample


@dataclass
class Proposal:
    tokens: list[int]
    q: np.ndarray | None = None  # (len(tokens), vocab) when the drafter sampled


class Drafter(Protocol):
    name: str

    def propose(self, committed: Sequence[int], k: int, params: SamplingParams,
                rng: np.random.Generator) -> Proposal: ...

    def prefill(self, prompt: Sequence[int]) -> None:
        """Digest the prompt before generation starts, so its cost counts as prompt time."""

    def reset(self) -> None: ...


class NoDrafter:
    """Plain decoding: the engine's loop with K = 0."""

    name = "none"

    def propose(self, committed, k, params, rng) -> Proposal:
        return Proposal([])

    def prefill(self, prompt) -> None:
        pass

    def reset(self) -> None:
        pass


class ModelDrafter:
    """A small model in its own context. Its cache is kept between steps and only the tokens it
    has not seen are decoded, so a rejected tail costs a rollback, not a re-decode."""

    name = "model"

    def __init__(self, ctx: DecodeContext, p_min: float = 0.0):
        self.ctx = ctx
        self.p_min = p_min  # stop drafting when the draft's top probability falls below this

    def propose(self, committed: Sequence[int], k: int, params: SamplingParams,
                rng: np.random.Generator) -> Proposal:
        if k <= 0:
            return Proposal([])
        ctx = self.ctx
        k = min(k, ctx.n_ctx - len(committed))
        if k <= 0:
            return Proposal([])
        ctx.reuse_prefix(committed)
        logits = ctx.decode(committed[ctx.n_past:], logits="last")[0]
        tokens: list[int] = []
        q_rows: list[np.ndarray] = []
        for i in range(k):
            if params.greedy:
                token = int(np.argmax(logits))
                if self.p_min > 0 and _top_probability(logits) < self.p_min:
                    break
            else:
                q = probabilities(logits[None, :], params)[0]
                if self.p_min > 0 and float(q.max()) < self.p_min:
                    break
                token = sample(q, rng)
                q_rows.append(q)
            tokens.append(token)
            if i + 1 < k:  # the last draft needs no logits of its own
                logits = ctx.decode([token], logits="last")[0]
        q = np.stack(q_rows) if q_rows else None
        return Proposal(tokens, q)

    def prefill(self, prompt: Sequence[int]) -> None:
        # Everything but the last token: propose() decodes that one and gets its logits.
        self.ctx.reuse_prefix(prompt)
        self.ctx.decode(prompt[self.ctx.n_past:-1], logits="none")

    def reset(self) -> None:
        self.ctx.clear()


def _top_probability(logits: np.ndarray) -> float:
    top = float(logits.max())
    return 1.0 / float(np.exp(logits - top, dtype=np.float32).sum())


class PromptLookupDrafter:
    """Prompt lookup decoding: find the latest earlier occurrence of the sequence's last n tokens
    (n from max_ngram down to min_ngram) and propose what followed it. No second model, so a
    draft costs nothing; it shines when the output copies the input (code edits, summaries)."""

    name = "lookup"

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1):
        self.max_ngram, self.min_ngram = max_ngram, min_ngram
        self._indexed: list[int] = []
        self._last_seen: dict[tuple[int, ...], int] = {}  # n-gram -> end position of its latest occurrence

    def _index(self, committed: Sequence[int]) -> None:
        # Incremental: re-index only from where the committed sequence diverged from what we saw.
        common = 0
        for a, b in zip(self._indexed, committed):
            if a != b:
                break
            common += 1
        if common < len(self._indexed):
            self.reset()
            common = 0
        # An n-gram ending at position `end` is recorded only once the token after it exists,
        # so a lookup never finds the sequence's own suffix.
        for end in range(max(common, 1), len(committed)):
            for n in range(self.min_ngram, self.max_ngram + 1):
                if end - n >= 0:
                    self._last_seen[tuple(committed[end - n:end])] = end
        self._indexed = list(committed)

    def propose(self, committed: Sequence[int], k: int, params, rng) -> Proposal:
        if k <= 0 or not committed:
            return Proposal([])
        self._index(committed)
        for n in range(self.max_ngram, self.min_ngram - 1, -1):
            if len(committed) < n:
                continue
            end = self._last_seen.get(tuple(committed[-n:]))
            if end is not None:
                return Proposal(list(committed[end:end + k]))
        return Proposal([])

    def prefill(self, prompt: Sequence[int]) -> None:
        self._index(prompt)

    def reset(self) -> None:
        self._indexed = []
        self._last_seen = {}
