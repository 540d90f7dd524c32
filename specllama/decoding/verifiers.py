"""How the target checks a draft: one small interface, two schemes.

`decode` runs the target over [last] + draft and returns one logits row per draft position plus
one (row i predicts the token after i drafts); `commit` leaves the target's cache holding the
prefix + [last] + the accepted drafts. The cache surgery itself lives in the llama.cpp adapter.

- causal: one batch [last, d1 .. dK] with logits at every position: K+1 tokens a step.
- stairs (Grigaliunas & Lukosevicius, 2024): K+1 separate sequences, sequence i = prefix + [last] +
  d1 .. di, sharing the prefix through sequence copies, one logits row each. The same greedy text
  at (K+1)(K+2)/2 decoded tokens a step, which the benchmark shows is a loss on a CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Protocol, Sequence

import numpy as np

from specllama.decoding.cost.model import causal_rows
from specllama.errors import SpecllamaError
from specllama.llama.context import DecodePart


@dataclass(frozen=True)
class TargetContext:
    """The target context a verifier needs, declared before anything loads (runtime/plan.py asks)."""

    sequences: int  # cache sequences (llama.cpp's n_seq_max)
    unified: bool  # one cache shared by every sequence, rather than one cache each


class Verifier(Protocol):
    name: str

    def context(self, slots: int) -> TargetContext:
        """The target context this scheme verifies `slots` prompts at a time in; refuses
        (SpecllamaError) a number of slots it cannot serve."""

    def batch_tokens(self, k: int) -> int:
        """Tokens the target decodes to verify k drafts (what the cost model charges)."""

    def max_k(self, ctx, seq: int = 0) -> int:
        """The longest draft the context can verify now for that sequence."""

    def decode(self, ctx, items: Sequence[tuple[int, int, Sequence[int]]],
               ids_only: Sequence[bool] = ()) -> list[np.ndarray]:
        """items: (sequence, last, draft) each; returns each one's logits rows, in one decode (or,
        where ids_only[i] says so and the scheme can, only each row's argmax id: a 1-D array)."""

    def commit(self, ctx, seq: int, n_past: int, last: int, draft: Sequence[int], n_accepted: int) -> None: ...

    def check(self, ctx) -> None:
        """Refuse (SpecllamaError) a context this scheme cannot verify in, before any decoding."""


class CausalVerifier:
    name = "causal"

    def context(self, slots: int) -> TargetContext:
        return TargetContext(slots, unified=False)  # one sequence, and one cache, a prompt

    def batch_tokens(self, k: int) -> int:
        return causal_rows(k)

    def max_k(self, ctx, seq: int = 0) -> int:
        k = ctx.n_ctx - ctx.past(seq) - 1
        return min(k, exact_limit(self, ctx))

    def decode(self, ctx, items: Sequence[tuple[int, int, Sequence[int]]],
               ids_only: Sequence[bool] = ()) -> list[np.ndarray]:
        ids = list(ids_only) + [False] * (len(items) - len(ids_only))
        for seq, _, draft in items:
            if draft:  # a recurrent cache may need a checkpoint to drop rejected drafts (llama/rollback.py)
                ctx.prepare_rollback(seq, len(draft))
        return ctx.decode_parts([DecodePart(seq, [last, *draft], "argmax" if only else "all")
                                 for (seq, last, draft), only in zip(items, ids)])

    def commit(self, ctx, seq: int, n_past: int, last: int, draft: Sequence[int], n_accepted: int) -> None:
        ctx.rollback(n_past + 1 + n_accepted, seq)  # keep [last] + the accepted drafts

    def check(self, ctx) -> None:
        pass  # any context


class StairsVerifier:
    name = "stairs"
    SEQUENCES = 17  # it decodes K+1 sequences side by side: up to K = 16

    def context(self, slots: int) -> TargetContext:
        if slots > 1:
            raise SpecllamaError("stairs verification runs one prompt at a time: drop --parallel or --verify stairs")
        # Its sequences are copies of one prefix: in one shared cache each copy is metadata only.
        return TargetContext(self.SEQUENCES, unified=True)

    def batch_tokens(self, k: int) -> int:
        return (k + 1) * (k + 2) // 2

    def max_k(self, ctx, seq: int = 0) -> int:
        if getattr(ctx, "rollback_method", "cells") != "cells":
            raise SpecllamaError("stairs verification copies and cuts cache sequences, which a recurrent or hybrid "
                                 "model's cache cannot: use --verify causal")
        if ctx.n_seq_max < 2 or not getattr(ctx, "unified", False):
            raise SpecllamaError("stairs verification needs a target context with several sequences: "
                                 "load the runtime with verify='stairs'")
        if getattr(ctx, "exact", False):
            # Measured: stairs' rows (separate sequences in one unified cache) leave plain
            # decoding's greedy text even at 6 tokens a batch, where causal batches stay exact.
            raise SpecllamaError("stairs verification cannot be made exact: use --verify causal with --exact")
        k = ctx.n_seq_max - 1
        while k > 0 and (self.batch_tokens(k) > ctx.n_batch or ctx.n_past + self.batch_tokens(k) > ctx.n_ctx):
            k -= 1
        return k

    def decode(self, ctx, items: Sequence[tuple[int, int, Sequence[int]]],
               ids_only: Sequence[bool] = ()) -> list[np.ndarray]:
        # Always whole rows (the greedy verifier reads ids from either). Its stairs are the
        # context's spare sequences: one sequence at a time (the engine gives a unified context one slot).
        (seq, last, draft), = items
        return [ctx.decode_stairs(last, draft)]

    def commit(self, ctx, seq: int, n_past: int, last: int, draft: Sequence[int], n_accepted: int) -> None:
        ctx.commit_stairs(last, draft, n_accepted)

    def check(self, ctx) -> None:
        self.max_k(ctx)  # refuses a context without sequences to spare


def exact_rows(ctx) -> int | None:
    """The most rows one decode may hold and stay exact on this context's model (the one name of
    that limit in decoding/); None outside exact mode."""
    return ctx.model.exact_max_batch if getattr(ctx, "exact", False) else None


def exact_limit(verifier: Verifier, ctx) -> int:
    """The longest draft whose verification batch stays exact (no limit outside exact mode)."""
    rows = exact_rows(ctx)
    if rows is None:
        return 1 << 30
    k = 0
    while verifier.batch_tokens(k + 1) <= rows:
        k += 1
    return k


VERIFIERS = {v.name: v for v in (CausalVerifier(), StairsVerifier())}


def context_for(verifiers: Iterable[str], slots: int) -> TargetContext:
    """One target context that each named scheme can verify in (a session's requests may use any of
    them): the most sequences any asks for, shared by all where any needs them shared. A causal batch
    reads only its own sequence, so it verifies in a shared cache too."""
    needs = [VERIFIERS[name].context(slots) for name in verifiers] or [CausalVerifier().context(slots)]
    return TargetContext(max(n.sequences for n in needs), any(n.unified for n in needs))
