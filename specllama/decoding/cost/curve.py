"""A startup microbenchmark of decode costs: T(n)/T(1) for batches of n rows and the draft's
one-token cost, timed on bare decodes before any generation (`specllama costs`, `bench`).

It is only a prior: a bare decode misses what a step also pays (logits, verification, Python), which
on a fast backend is most of the cost, so the engine plans with what its own steps cost
(online.py), starting from this curve's shape when one is cached.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Sequence

from specllama.llama.context import DecodeContext


@dataclass(frozen=True)
class CostCurve:
    t1_s: float  # seconds for the target to decode one token (logits included)
    ratios: list[float]  # ratios[n - 1] = T(n) / T(1), for n = 1 .. max_n
    draft_ratio: float | None  # c: draft one-token time / target one-token time; None without a draft
    n_past: int  # cache fill the timings were taken at
    reps: int

    @property
    def max_n(self) -> int:
        return len(self.ratios)

    def ratio(self, n: int) -> float | None:
        """T(n)/T(1), or None when n was not measured."""
        return self.ratios[n - 1] if 1 <= n <= len(self.ratios) else None

    def to_dict(self) -> dict:
        return asdict(self)


SMALL_N, SMALL_N_REPEATS = 4, 3  # batches of up to 4 tokens are timed 3x per round (see below)


def measured_sizes(max_n: int) -> list[int]:
    """The batch sizes timed for a curve to max_n: every n up to 17 (where the kernels' steps
    decide K), then every 4th to 32 and every 8th beyond, and a row each side of every 16th:
    llama.cpp's kernels work on blocks of rows, and one row past a block costs most of another
    (63/64/65 rows 936/772/847 ms here, bench/measured/vm-20261125-verify-rows), which a line
    through 28, 32 and 40 would miss. The rest is interpolated. Keeps a 64-point curve under a
    minute here."""
    sizes = [n for n in range(1, max_n + 1)
             if n <= 17 or (n <= 32 and n % 4 == 0) or n % 8 == 0 or n % 16 in (1, 15)]
    return sizes if sizes[-1] == max_n else sizes + [max_n]


def _interpolate(times: dict[int, float], max_n: int) -> list[float]:
    sizes = sorted(times)
    out = []
    for n in range(1, max_n + 1):
        if n in times:
            out.append(times[n])
            continue
        lo = max(s for s in sizes if s < n)
        hi = min(s for s in sizes if s > n)
        out.append(times[lo] + (times[hi] - times[lo]) * (n - lo) / (hi - lo))
    return out


def measure_cost_curve(target_ctx: DecodeContext, draft_ctx: DecodeContext | None = None, *,
                       max_n: int = 16, reps: int = 3, n_past: int = 256,
                       filler: Sequence[int] | None = None) -> CostCurve:
    """Time the target decoding n tokens in one batch (logits at every position, as verification
    asks) at a cache fill of n_past, for the sizes of measured_sizes(max_n), and the draft's
    one-token decode at the same fill.

    Medians of `reps` timings (SMALL_N_REPEATS x reps for n <= SMALL_N) after one warm-up round;
    the n values are interleaved within each round so a slow moment of a shared machine lands on
    all of them alike. Both caches are
    cleared before and after (callers must not rely on what they held).
    """
    if max_n < 1 or reps < 1:
        raise ValueError("max_n and reps must be >= 1")
    vocab = target_ctx.model.n_vocab
    # Any real token ids do: decode time does not depend on which tokens they are.
    tokens = [t % vocab for t in (filler or range(1000, 1000 + max_n + n_past))]
    n_past = max(1, min(n_past, target_ctx.n_ctx - max_n - 1))
    prefix = (tokens * (n_past // len(tokens) + 1))[:n_past]
    batch = (tokens * (max_n // len(tokens) + 1))[:max_n]
    sizes = measured_sizes(max_n)

    contexts = [target_ctx] + ([draft_ctx] if draft_ctx is not None else [])
    for ctx in contexts:
        ctx.clear()
        ctx.decode(prefix[:min(n_past, ctx.n_ctx - 2)], logits="none")
    try:
        target_times: dict[int, list[float]] = {n: [] for n in sizes}
        draft_times: list[float] = []
        for rep in range(reps + 1):  # round 0 is the warm-up and is discarded
            for n in sizes:
                # The short batches decide whether a draft of a token or two pays (a free drafter
                # breaks even at acceptance T(2)/T(1) - 1): they are cheap, so timed more often.
                for _ in range(SMALL_N_REPEATS if n <= SMALL_N else 1):
                    elapsed = _time_decode(target_ctx, batch[:n], "all")
                    if rep:
                        target_times[n].append(elapsed)
            if draft_ctx is not None:
                # The drafter decodes one token at a time with one row of logits: time exactly that.
                for _ in range(3):
                    elapsed = _time_decode(draft_ctx, batch[:1], "last")
                    if rep:
                        draft_times.append(elapsed)
        medians = _interpolate({n: statistics.median(t) for n, t in target_times.items()}, max_n)
        t1 = medians[0]
        draft_ratio = statistics.median(draft_times) / t1 if draft_times else None
    finally:
        for ctx in contexts:
            ctx.clear()
    return CostCurve(t1_s=t1, ratios=[m / t1 for m in medians], draft_ratio=draft_ratio, n_past=n_past, reps=reps)


def _time_decode(ctx: DecodeContext, tokens: Sequence[int], logits: str) -> float:
    """Decode on top of the current cache, then roll back so every timing sees the same fill."""
    keep = ctx.n_past
    start = time.perf_counter()
    ctx.decode(tokens, logits=logits)
    elapsed = time.perf_counter() - start
    ctx.rollback(keep)
    return elapsed
