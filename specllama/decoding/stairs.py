""""Stairs" verification (Grigaliūnas & Lukoševičius, 2024).

Instead of one causal batch [last, d1 .. dK] with logits at every position, the target decodes
K+1 separate sequences side by side: sequence i holds the shared prefix plus [last, d1 .. di], and
only its last token asks for logits. Row i therefore predicts the token after i drafts, exactly as
the causal batch's row i does, so greedy acceptance by the stair rule (longest prefix where
draft[i] == argmax(row i)) gives the same text. The prefix is shared by copying sequence 0's cells
(metadata only in a unified cache); the stairs themselves cost (K+1)(K+2)/2 tokens instead of K+1,
which is what the benchmark shows.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from specllama.errors import SpecllamaError
from specllama.llama.context import DecodeContext


def stair_tokens(k: int) -> int:
    return (k + 1) * (k + 2) // 2


def max_stairs_k(ctx: DecodeContext) -> int:
    """The largest K the context can verify at once: sequences, batch size and free cells allow it."""
    k = ctx.n_seq_max - 1
    while k > 0 and (stair_tokens(k) > ctx.n_batch or ctx.n_past + stair_tokens(k) > ctx.n_ctx):
        k -= 1
    return k


def decode_stairs(ctx: DecodeContext, last: int, draft: Sequence[int]) -> np.ndarray:
    """Decode the K+1 stairs; returns (K+1, vocab) logits, row i predicting the token after draft[:i]."""
    k = len(draft)
    if k + 1 > ctx.n_seq_max:
        raise SpecllamaError(f"stairs verification of {k} drafts needs {k + 1} sequences; "
                             f"the target context has {ctx.n_seq_max}")
    n_past = ctx.n_past
    for seq in range(1, k + 1):
        ctx.copy_sequence(0, seq, 0, n_past)
    tokens, positions, seqs, want = [], [], [], []
    for seq in range(k + 1):
        stair = [last, *draft[:seq]]
        tokens += stair
        positions += range(n_past, n_past + len(stair))
        seqs += [(seq,)] * len(stair)
        want += [False] * (len(stair) - 1) + [True]
    return ctx.decode_multi(tokens, positions, seqs, want)


def commit_stairs(ctx: DecodeContext, last: int, draft: Sequence[int], n_accepted: int) -> None:
    """Make sequence 0 hold prefix + [last] + accepted drafts (taken from the accepted stair's
    cells, so nothing is decoded again) and drop the other stairs."""
    n_past = ctx.n_past
    if n_accepted > 0:
        ctx.remove(0, n_past, -1)
        ctx.copy_sequence(n_accepted, 0, n_past, n_past + 1 + n_accepted)
    for seq in range(1, len(draft) + 1):
        ctx.remove(seq, 0, -1)
    ctx.tokens.extend([last, *draft[:n_accepted]])
