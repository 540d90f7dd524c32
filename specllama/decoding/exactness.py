"""Is speculative greedy output the target's own greedy output?

Batched and one-token decodes use different kernels, so at a near-tie of the top two logits the
greedy choice may legitimately differ. A divergence is excused only where the target's top-2 gap
at that position, from a fresh decode of the common prefix, is below a small tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from specllama.llama.context import DecodeContext

# Measured on the 1.5B Q4_K_M target (AVX-512 build, 2 threads): the ten largest logits of a row
# differ between a one-token decode and a batch of 5-16 by 0.17 (median) to 0.35 (max), so a top-2
# gap below about half a logit can flip with the batch shape alone. Larger gaps never should.
NEAR_TIE_LOGITS = 0.5


@dataclass(frozen=True)
class Comparison:
    identical: bool
    position: int | None = None  # index into the generated tokens of the first difference
    gap: float | None = None  # the target's top-2 logit gap there
    near_tie: bool = False

    @property
    def verdict(self) -> str:
        return "identical" if self.identical else ("near_tie" if self.near_tie else "different")


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def top2_gap(ctx: DecodeContext, tokens: Sequence[int]) -> float:
    """The gap between the two largest logits after `tokens`, from a fresh decode (clears ctx)."""
    ctx.clear()
    row = ctx.decode(list(tokens), logits="last")[0]
    ctx.clear()
    top2 = np.partition(row, -2)[-2:]
    return float(top2[1] - top2[0])


def compare_greedy(ctx: DecodeContext, prompt: Sequence[int], reference: Sequence[int], candidate: Sequence[int],
                   tolerance: float = NEAR_TIE_LOGITS) -> Comparison:
    """Compares two greedy outputs for the same prompt; only the first divergence can be judged,
    since everything after it follows a different prefix."""
    at = first_divergence(reference, candidate)
    if at is None:
        return Comparison(True)
    if at >= min(len(reference), len(candidate)):  # one stopped early: a length difference, not a tie
        return Comparison(False, at)
    gap = top2_gap(ctx, list(prompt) + list(reference[:at]))
    return Comparison(False, at, gap, gap < tolerance)
