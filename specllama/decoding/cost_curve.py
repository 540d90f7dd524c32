"""The machine's own cost model of speculation: what verifying n tokens costs, relative to one.

Speculation pays only when the tokens gained per step outweigh what a step costs. With draft
length K, acceptance rate alpha and a draft whose one-token decode costs c target-decodes:

    E       = (1 - alpha^(K+1)) / (1 - alpha)          tokens gained per target decode
    cost    = K*c + T(K+1)/T(1)                          one step, in one-token target decodes
    speedup = E / cost

T(n)/T(1) is nowhere near 1 on a CPU with few cores (llama-bench, Qwen2.5-Coder 1.5B Q4_K_M on the
2-core AVX2 development machine: 1.61 at n = 3), so we measure it here rather than assume it. Used
by `bench` for its predicted speedups and meant for choosing K automatically (`-k auto`).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

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


def step_cost(verify_ratio: Callable[[int], float | None], k: int, draft_cost: float,
              verify_tokens: int | None = None) -> float | None:
    """One speculative step in one-token target decodes: K*c for the drafts plus T(n)/T(1) for
    verifying n tokens (K+1 in a causal batch). None when T(n) was not measured. K = 0 is 1."""
    ratio = verify_ratio(verify_tokens or k + 1)
    return None if ratio is None else k * draft_cost + ratio


def expected_tokens_per_step(k: int, alpha: float) -> float:
    """E = 1 + alpha + ... + alpha^K: the expected accepted drafts plus the target's own token,
    assuming each draft position is accepted independently with probability alpha."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def predicted_speedup(curve: CostCurve, k: int, alpha: float | None, draft_ratio: float | None = None,
                      verify_tokens: int | None = None) -> float | None:
    """The cost model's speedup over plain decoding for draft length k at acceptance alpha.
    draft_ratio is c (None: the curve's measured draft ratio; 0 for a free drafter such as prompt
    lookup). verify_tokens is what the target decodes per step (default K+1, a causal batch; stairs
    verification decodes (K+1)(K+2)/2). None when it cannot be predicted: no acceptance measured,
    or the verify batch beyond the measured curve."""
    if k <= 0:
        return 1.0
    if alpha is None:
        return None
    c = curve.draft_ratio if draft_ratio is None else draft_ratio
    cost = step_cost(curve.ratio, k, c, verify_tokens) if c is not None else None
    return None if cost is None else expected_tokens_per_step(k, alpha) / cost


def break_even_acceptance(curve: CostCurve, k: int, draft_cost: float) -> float | None:
    """The per-position acceptance at which K drafts a step match plain decoding; None when even
    100 % acceptance loses (or the batch was not measured)."""
    def rate(alpha: float) -> float | None:
        return predicted_speedup(curve, k, alpha, draft_cost)

    best = rate(1.0)
    if best is None or best <= 1.0:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(40):  # rate grows with alpha: bisect
        mid = (lo + hi) / 2
        if rate(mid) < 1.0:
            lo = mid
        else:
            hi = mid
    return hi


SMALL_N, SMALL_N_REPEATS = 4, 3  # batches of up to 4 tokens are timed 3x per round (see below)


def measured_sizes(max_n: int) -> list[int]:
    """The batch sizes timed for a curve to max_n: every n up to 17 (where the kernels' steps
    decide K), then every 4th to 32 and every 8th beyond (where only N's choice looks, and the
    curve is smooth); the rest is interpolated. Keeps a 64-point curve under a minute here."""
    sizes = [n for n in range(1, max_n + 1) if n <= 17 or (n <= 32 and n % 4 == 0) or n % 8 == 0]
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
