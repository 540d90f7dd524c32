"""Drafters: where the K proposed tokens come from.

A drafter sees the committed sequence (prompt + accepted output, ending with the token the target
has not decoded yet) and proposes up to k tokens that follow it, under the request's sampling and
p_min. `q` holds the drafter's probabilities for each proposed token when it sampled them; None
means the proposals were deterministic (greedy or looked up), which the rejection sampler treats as
one-hot. After verification the engine calls `rollback(n)`: keep state for the first n committed
tokens only (the model drafter's cache drops its rejected drafts there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from specllama.decoding.request import GenerationConfig
from specllama.decoding.sampling import probabilities, sample
from specllama.llama.context import DecodeContext


@dataclass
class Proposal:
    tokens: list[int]
    q: np.ndarray | None = None  # (len(tokens), vocab) when the drafter sampled


class Drafter(Protocol):
    name: str

    def propose(self, committed: Sequence[int], k: int, config: GenerationConfig,
                rng: np.random.Generator) -> Proposal: ...

    def prefill(self, prompt: Sequence[int]) -> None:
        """Digest the prompt before generation starts, so its cost counts as prompt time."""

    def rollback(self, n_tokens: int) -> None:
        """Keep what follows from the first n_tokens committed tokens; drop the rest."""

    def reset(self) -> None: ...


class NoDrafter:
    """Plain decoding: the engine's loop with K = 0."""

    name = "none"

    def propose(self, committed, k, config, rng) -> Proposal:
        return Proposal([])

    def prefill(self, prompt) -> None:
        pass

    def rollback(self, n_tokens: int) -> None:
        pass

    def reset(self) -> None:
        pass


class ModelDrafter:
    """A small model in its own context. Its cache is kept between steps and only the tokens it
    has not seen are decoded, so a rejected tail costs a rollback, not a re-decode."""

    name = "model"

    def __init__(self, ctx: DecodeContext):
        self.ctx = ctx

    def propose(self, committed: Sequence[int], k: int, config: GenerationConfig,
                rng: np.random.Generator) -> Proposal:
        params, p_min = config.sampling, config.p_min  # p_min: stop when the top probability falls below
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
                if p_min > 0 and _top_probability(logits) < p_min:
                    break
            else:
                q = probabilities(logits[None, :], params)[0]
                if p_min > 0 and float(q.max()) < p_min:
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

    def rollback(self, n_tokens: int) -> None:
        # Its cache holds the committed tokens and the drafts it decoded: the accepted ones stay.
        self.ctx.rollback(min(n_tokens, self.ctx.n_past))

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

    def propose(self, committed: Sequence[int], k: int, config, rng) -> Proposal:
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

    def rollback(self, n_tokens: int) -> None:
        pass  # the index follows the committed sequence by itself (see _index)

    def reset(self) -> None:
        self._indexed = []
        self._last_seen = {}
