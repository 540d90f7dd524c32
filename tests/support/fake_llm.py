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
    exact_max_batch = 7  # as the real Q4_K_M target measured (llama/exact_rows.py)
    eog_ids: list[int] = [EOG]  # a replay of real texts adds their end token (scripts/measure/policy_replay.py)

    def piece(self, token: int, special: bool = False) -> bytes:
        return f"<{token}>".encode()

    def is_eog(self, token: int) -> bool:
        return token in self.eog_ids


class FakeClock:
    """Virtual time for a fake backend: the engine reads it (Engine(clock=...)) and each fake
    decode advances it by what that decode costs, so step costs are exact and tests deterministic."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeContext:
    """Sequences like DecodeContext's: `held[s]` per sequence, `tokens` is sequence 0's. With a
    clock, every decode of n rows advances it by cost(n) seconds (a fake backend's step costs)."""

    unified = False
    exact = False
    llama_seconds = 0.0  # no llama.cpp inside
    rollback_method = "cells"  # any tail is dropped in place, for free

    def __init__(self, rule: Callable[[Sequence[int]], np.ndarray], n_ctx: int = 4096, n_seq_max: int = 1,
                 clock: FakeClock | None = None, cost: Callable[[int], float] | None = None):
        self.clock, self.cost = clock, cost
        self.model = FakeModel()
        self.rule = rule
        self.n_ctx = n_ctx
        self.n_seq_max, self.n_batch = n_seq_max, 512
        self.held: list[list[int]] = [[] for _ in range(n_seq_max)]
        self.decoded = 0  # tokens pushed through "the network": what speculation tries to save
        self.decode_calls = 0
        self.batch_sizes: list[int] = []  # tokens per decode call, in order
        # Told of every decode (before its tokens join `held`, as DecodeContext tells them), rollback
        # and clear: a fake MTP head follows the target through them (tests/unit/test_mtp_auto.py).
        self.observers: list = []

    @property
    def tokens(self) -> list[int]:
        return self.held[0]

    @property
    def n_past(self) -> int:
        return len(self.held[0])

    def past(self, seq: int) -> int:
        return len(self.held[seq])

    def _push(self, seq, tokens, logits) -> list:
        held = self.held[seq]
        assert len(held) + len(tokens) <= self.n_ctx, "engine overflowed the context"
        rows = []
        for i, t in enumerate(tokens):
            held.append(t)
            if logits == "all" or (logits == "last" and i == len(tokens) - 1) or (
                    not isinstance(logits, str) and i in logits):
                rows.append(self.rule(held))
        self.decoded += len(tokens)
        return rows

    def decode(self, tokens, logits="last", seq: int = 0):
        if not tokens:  # as DecodeContext: nothing to decode is no decode
            return np.empty((0, VOCAB), dtype=np.float32)
        self._tell(tokens, [seq] * len(tokens))
        rows = self._push(seq, tokens, logits)
        self._spend(len(tokens))
        return np.array(rows, dtype=np.float32).reshape(len(rows), VOCAB)

    def _tell(self, tokens, seqs) -> None:
        if self.observers:
            at = {s: len(self.held[s]) for s in set(seqs)}
            positions = []
            for s in seqs:
                positions.append(at[s])
                at[s] += 1
            for observer in self.observers:
                observer.decoded(list(tokens), positions, [(s,) for s in seqs])

    def decode_parts(self, parts):
        self._tell([t for p in parts for t in p.tokens], [p.seq for p in parts for _ in p.tokens])
        out = []
        for p in parts:  # "argmax": each position's argmax id only, as DecodeContext returns it
            rows = np.array(self._push(p.seq, p.tokens, "all" if p.logits == "argmax" else p.logits),
                            dtype=np.float32).reshape(-1, VOCAB)
            out.append(np.argmax(rows, axis=1) if p.logits == "argmax" else rows)
        self._spend(sum(len(p.tokens) for p in parts))
        return out

    def _spend(self, rows: int) -> None:
        self.decode_calls += 1
        self.batch_sizes.append(rows)
        if self.clock is not None:
            self.clock.now += self.cost(rows)

    def rollback(self, n_past: int, seq: int = 0) -> None:
        assert n_past <= self.past(seq)
        del self.held[seq][n_past:]
        for observer in self.observers:
            observer.rolled_back(seq, n_past)

    def prepare_rollback(self, seq: int, n_tokens: int) -> None:
        pass

    def checkpoint(self, seq: int = 0, *, keep: bool = True) -> None:
        pass

    def common_prefix(self, tokens, seq: int = 0) -> int:
        common = 0
        for a, b in zip(self.held[seq], tokens):
            if a != b:
                break
            common += 1
        return common

    def reuse_prefix(self, tokens, seq: int = 0) -> int:
        self.rollback(min(self.common_prefix(tokens, seq), len(tokens) - 1), seq)
        return self.past(seq)

    def clear(self, seq: int | None = None) -> None:
        for s, held in enumerate(self.held):
            if seq is None or s == seq:
                held.clear()
        for observer in self.observers:
            observer.cleared(seq)


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

    unified = True

    def __init__(self, rule, n_ctx: int = 4096, n_seq_max: int = 17):
        super().__init__(rule, n_ctx, n_seq_max)

    def decode_stairs(self, last, draft):
        rows = [self.rule([*self.tokens, last, *draft[:i]]) for i in range(len(draft) + 1)]
        self.decoded += (len(draft) + 1) * (len(draft) + 2) // 2
        self.decode_calls += 1
        return np.array(rows, dtype=np.float32)

    def commit_stairs(self, last, draft, n_accepted):
        self.tokens.extend([last, *draft[:n_accepted]])


def judged(proposal, odds, seconds: float = 0.05, t1: float | None = 0.05, alone: bool = True):
    """The outcome (decoding/outcome.StepOutcome) of a step that verified `proposal`, with these
    odds per judged token (1.0: accepted for sure; the first one below 1 is where it stopped)."""
    from specllama.decoding.outcome import StepOutcome
    accepted = next((i for i, o in enumerate(odds) if o < 1.0), len(odds))
    return StepOutcome(len(proposal.tokens), proposal, accepted, tuple(odds), seconds, t1, alone)
