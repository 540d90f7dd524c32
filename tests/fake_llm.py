"""A scripted stand-in for GGUFModel + DecodeContext, so the engine loop is tested without llama.cpp.

The fake "language model" is a pure function of the tokens so far: `rule(tokens) -> logits row`.
Its context keeps `tokens` exactly as DecodeContext does, so rollbacks and prefix reuse are
observable. Token t prints as "<t>"; token 0 is end-of-generation.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

VOCAB = 32
EOG = 0


class FakeModel:
    n_vocab = VOCAB
    n_ctx_train = 4096

    def piece(self, token: int, special: bool = False) -> bytes:
        return f"<{token}>".encode()

    def is_eog(self, token: int) -> bool:
        return token == EOG


class FakeContext:
    def __init__(self, rule: Callable[[Sequence[int]], np.ndarray], n_ctx: int = 4096):
        self.model = FakeModel()
        self.rule = rule
        self.n_ctx = n_ctx
        self.n_seq_max = 1
        self.tokens: list[int] = []
        self.decoded = 0  # tokens pushed through "the network": what speculation tries to save
        self.decode_calls = 0

    @property
    def n_past(self) -> int:
        return len(self.tokens)

    def decode(self, tokens, logits="last"):
        assert self.n_past + len(tokens) <= self.n_ctx, "engine overflowed the context"
        rows = []
        for i, t in enumerate(tokens):
            self.tokens.append(t)
            if logits == "all" or (logits == "last" and i == len(tokens) - 1) or (
                    not isinstance(logits, str) and i in logits):
                rows.append(self.rule(self.tokens))
        self.decoded += len(tokens)
        self.decode_calls += 1
        return np.array(rows, dtype=np.float32).reshape(len(rows), VOCAB)

    def rollback(self, n_past: int) -> None:
        assert n_past <= self.n_past
        del self.tokens[n_past:]

    def reuse_prefix(self, tokens) -> int:
        common = 0
        for a, b in zip(self.tokens, tokens):
            if a != b:
                break
            common += 1
        self.rollback(min(common, len(tokens) - 1))
        return self.n_past

    def clear(self) -> None:
        self.tokens.clear()


def counting_rule(step: int = 1, end_after: int | None = None):
    """Greedy next token = last + step (mod VOCAB, skipping EOG), ending after `end_after` tokens."""
    def rule(tokens):
        row = np.zeros(VOCAB, dtype=np.float32)
        nxt = (tokens[-1] + step) % VOCAB or 1
        if end_after is not None and len(tokens) >= end_after:
            nxt = EOG
        row[nxt] = 5.0
        return row
    return rule


def noisy_rule(seed: int, flip_every: int = 3):
    """Like counting_rule(1) but every `flip_every`-th position prefers last + 2: a draft that
    disagrees with the target now and then."""
    def rule(tokens):
        row = np.random.default_rng(seed * 1000 + len(tokens)).normal(0, 1, VOCAB).astype(np.float32)
        step = 2 if len(tokens) % flip_every == 0 else 1
        row[(tokens[-1] + step) % VOCAB or 1] += 10.0
        return row
    return rule


def random_rule(seed: int, temperature_spread: float = 1.0):
    """A peaky but random distribution that depends on the whole prefix: for sampling tests."""
    def rule(tokens):
        h = hash(tuple(tokens)) % (2 ** 32)
        return (np.random.default_rng([seed, h]).normal(0, temperature_spread, VOCAB)).astype(np.float32)
    return rule


class FakeStairsContext(FakeContext):
    """A FakeContext with sequences to spare, so the stairs verifier runs on it: each stair's row
    is the rule applied to prefix + [last] + its drafts, as llama.cpp's separate sequences give."""

    def __init__(self, rule, n_ctx: int = 4096, n_seq_max: int = 17):
        super().__init__(rule, n_ctx)
        self.n_seq_max, self.n_batch = n_seq_max, 512

    def decode_stairs(self, last, draft):
        rows = [self.rule([*self.tokens, last, *draft[:i]]) for i in range(len(draft) + 1)]
        self.decoded += (len(draft) + 1) * (len(draft) + 2) // 2
        self.decode_calls += 1
        return np.array(rows, dtype=np.float32)

    def commit_stairs(self, last, draft, n_accepted):
        self.tokens.extend([last, *draft[:n_accepted]])
