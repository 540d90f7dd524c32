"""Sampling parameters and the logits -> probabilities transform.

Target and draft rows go through the same `probabilities()` so speculative verification compares like
with like. The filter order follows llama.cpp's default sampler chain (top-k, top-p, min-p, then
temperature):

1. top-k  keeps the k largest logits (exactly k; among logits tied at the cut-off an arbitrary few).
2. top-p  keeps the smallest set of the survivors whose temperature-1 probability (renormalised over
          the survivors) reaches top_p. Ties at the cut-off are all kept, so the set never depends on
          sort order (llama.cpp keeps an arbitrary subset of such ties).
3. min-p  keeps logits >= max_logit + log(min_p), i.e. temperature-1 probability >= min_p * max.
4. temperature scales the surviving logits; the softmax over them is the result.

So temperature decides only *how* the kept tokens are weighted, never *which* tokens are kept.
temperature <= 0 is greedy: a one-hot row at the argmax (lowest id on ties).

Rows are independent; the vocabulary-wide steps run on the whole (rows, vocab) block at once and only
the small kept sets are handled row by row. No step sorts the vocabulary unless top-p needs more than
_NUCLEUS_CANDIDATES tokens (a nearly flat distribution).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from specllama.decoding.limits import SettingError, number, whole

# How many of the largest probabilities top-p inspects before falling back to a full sort. A real
# model's nucleus at top_p 0.9-0.95 is almost always far smaller; partitioning is O(vocab) while a
# full sort of 152k is several times dearer.
_NUCLEUS_CANDIDATES = 8192
# top-p's first look: the temperature-1 weights (the top one is 1) at or above this; see _row_nucleus_floor
# (target_rows.peaked_filtered's too).
NUCLEUS_HEAD_WEIGHT = 1e-4
# sample()'s block of tokens: ~150 block sums and one block's cumsum instead of a 152k cumsum.
_SAMPLE_BLOCK = 1024


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0  # <= 0 means greedy
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1.0 = off
    min_p: float = 0.0  # 0 = off
    seed: int | None = None

    def __post_init__(self) -> None:
        # Types first (values come from chat.toml, saved conversations and JSON bodies as well as
        # the command line), then ranges; each a SettingError naming the setting (an API's `param`).
        if not number("temperature", self.temperature) >= 0:
            raise SettingError("temperature", f"temperature must be a finite number >= 0 (0 = greedy), got {self.temperature}")
        if not whole("top_k", self.top_k) >= 0:
            raise SettingError("top_k", f"top_k must be a whole number >= 0 (0 = off), got {self.top_k}")
        if not (0.0 < number("top_p", self.top_p) <= 1.0):
            raise SettingError("top_p", f"top_p must be in (0, 1] (1 = off), got {self.top_p}")
        if not (0.0 <= number("min_p", self.min_p) < 1.0):
            raise SettingError("min_p", f"min_p must be in [0, 1) (0 = off), got {self.min_p}")
        if self.seed is not None:
            whole("seed", self.seed)

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0


def probabilities(logits: np.ndarray, params: SamplingParams) -> np.ndarray:
    """(rows, vocab) logits -> (rows, vocab) float32 probabilities; see the module docstring for the
    order of the filters. Zero outside the kept set; every row sums to 1 (within float32 rounding,
    about 1e-6, which `sample` tolerates)."""
    x = np.asarray(logits, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"logits must be 2-D (rows, vocab), got shape {x.shape}")
    rows, vocab = x.shape

    if params.greedy:
        # np.argmax returns the lowest id among equal maxima, as llama.cpp's greedy sampler does.
        out = np.zeros((rows, vocab), dtype=np.float32)
        out[np.arange(rows), np.argmax(x, axis=1)] = 1.0
        return out

    kept = kept_weights(x, params)
    if isinstance(kept, np.ndarray):
        kept *= (1.0 / kept.sum(axis=1, keepdims=True, dtype=np.float64)).astype(np.float32)
        return kept
    out = np.zeros((rows, vocab), dtype=np.float32)
    for r, (token_ids, weights) in enumerate(kept):
        out[r, token_ids] = weights / weights.sum(dtype=np.float64)
    return out


def kept_weights(x: np.ndarray, params: SamplingParams) -> np.ndarray | list[tuple[np.ndarray, np.ndarray]]:
    """The filters and the temperature of `probabilities()` without the normalisation: a dense
    (rows, vocab) float32 block of weights (zero outside the kept set) where most of the vocabulary
    survives, else per row the kept token ids and their weights. Each row's largest weight is 1.
    Needs a temperature > 0."""
    rows, vocab = x.shape
    # 1. top-k: the columns of the k largest logits, unordered (a partition, not a sort).
    top_k = int(params.top_k)
    if 0 < top_k < vocab:
        columns = np.argpartition(x, vocab - top_k, axis=1)[:, vocab - top_k :]
        candidates = np.take_along_axis(x, columns, axis=1)
    else:
        columns = None  # every column is a candidate; candidate index == token id
        candidates = x
    row_max = candidates.max(axis=1, keepdims=True)
    keep = None  # every candidate, until a filter says otherwise

    # 2. top-p on temperature-1 weights exp(logit - max), which lie in (0, 1] with the top token at 1.
    if params.top_p < 1.0:
        weights = np.exp(candidates - row_max)
        keep = weights >= _nucleus_floor(weights, params.top_p)[:, None]

    # 3. min-p compared in logit space, as llama.cpp does: p_i >= min_p * p_max <=> l_i >= l_max + log(min_p).
    if params.min_p > 0.0:
        above = candidates >= row_max + np.float32(math.log(params.min_p))
        keep = above if keep is None else keep & above

    # 4. temperature on the survivors.
    inverse = inverse_temperature(params.temperature)
    if columns is None and (keep is None or np.count_nonzero(keep) * 8 > keep.size):
        # Most of the vocabulary survives: one dense in-place pass beats gathering indices (and with
        # no filter at all, nothing is masked: a pass over the vocabulary fewer, ~0.1 ms).
        dense = tempered(candidates, row_max, inverse)
        if keep is not None:
            dense *= keep
        return dense
    kept = []
    for r in range(rows):
        survivors = np.arange(candidates.shape[1]) if keep is None else np.flatnonzero(keep[r])
        kept.append((survivors if columns is None else columns[r, survivors],
                     tempered(candidates[r, survivors], row_max[r], inverse)))
    return kept


def inverse_temperature(temperature: float) -> np.float32:
    """1 / temperature in float32, capped so a denormal temperature gives greedy-like rows instead of
    0 * inf = NaN at the max."""
    return np.float32(min(1.0 / temperature, 1e30))


def tempered(logits: np.ndarray, top, inverse: np.float32) -> np.ndarray:
    """exp((logits - top) / temperature) in float32, a new array (every path that weighs tokens uses this
    one arithmetic, so their weights agree token for token). With `top` the max the largest weight is
    exactly 1, so float32 cannot overflow."""
    weights = logits - top
    weights *= inverse
    return np.exp(weights, out=weights)


def _nucleus_floor(weights: np.ndarray, top_p: float) -> np.ndarray:
    """Per row, the smallest weight that still belongs to the top-p nucleus: keeping every weight >= it
    gives the smallest (up to ties) set whose share of the row's total reaches top_p."""
    needed = top_p * weights.sum(axis=1, dtype=np.float64)
    return np.array([_row_nucleus_floor(row, need) for row, need in zip(weights, needed)], dtype=weights.dtype)


def _row_nucleus_floor(weights: np.ndarray, needed: float) -> float:
    """The nucleus floor of one row, from the smallest head of its descending order that reaches
    `needed`. Every weight at or above a cut-off is a head of that order (ties included), so the
    first head that reaches `needed` holds the crossing, and the crossing is the whole order's."""
    n = weights.size
    # 1. The weights at or above NUCLEUS_HEAD_WEIGHT: a real model's nucleus at top_p 0.95 lies
    #    among them in every row measured, a median of 68 tokens of 152k on prose
    #    (bench/measured/vm-20261128-r9-sampled-step), found without a partition of the row.
    head = weights[weights >= NUCLEUS_HEAD_WEIGHT]
    if head.size <= _NUCLEUS_CANDIDATES:
        floor = nucleus_crossing(np.sort(head)[::-1], needed)
        if floor is not None:
            return floor
    # 2. The largest _NUCLEUS_CANDIDATES: O(n) partition plus a small sort.
    if n > _NUCLEUS_CANDIDATES:
        floor = nucleus_crossing(np.sort(np.partition(weights, n - _NUCLEUS_CANDIDATES)[n - _NUCLEUS_CANDIDATES:])[::-1], needed)
        if floor is not None:
            return floor
    # 3. A nearly flat row whose nucleus is bigger than both: the whole row sorted.
    descending = np.sort(weights)[::-1]
    floor = nucleus_crossing(descending, needed)
    # None only when rounding leaves the whole sum a hair below `needed` (top_p near 1): the smallest.
    return descending[-1] if floor is None else floor


def nucleus_crossing(descending: np.ndarray, needed: float, block: int = 256) -> float | None:
    """The value at which the running sum of a descending row first reaches `needed`; None if it
    never does.

    A float64 cumsum over 152k values is slow (no SIMD), so sum fixed-size blocks first (fast
    reduction), find the block where the running sum crosses, and run the cumsum inside that block only.
    """
    n = descending.size
    if n == 0:
        return None
    padded = np.zeros(-(-n // block) * block, dtype=descending.dtype)
    padded[:n] = descending  # trailing zeros change no sum
    block_cumulative = np.cumsum(padded.reshape(-1, block).sum(axis=1, dtype=np.float64))
    if block_cumulative[-1] < needed:
        return None
    b = int(np.searchsorted(block_cumulative, needed))
    before = block_cumulative[b - 1] if b else 0.0
    inside = before + np.cumsum(padded[b * block:(b + 1) * block], dtype=np.float64)
    # The clamp only matters when the block's own cumsum rounds a hair below its block sum.
    return descending[min(b * block + int(np.searchsorted(inside, needed)), n - 1)]


def sample(probs_row: np.ndarray, rng: np.random.Generator) -> int:
    """Draw one token id from a row of non-negative weights by inverse CDF.

    The uniform draw is scaled by the row's own total, so rows summing to 1 +- rounding (or any
    positive total) are fine, and a zero-weight token can never be returned. The running sum is
    taken in two levels (_SAMPLE_BLOCK-token blocks, then inside the one block the draw falls in):
    a float64 cumsum over a 152k vocabulary took 0.7-1.7 ms here, near the GPU's whole 1.9 ms
    step (bench/measured/lent-20261126-r2-gpu-heldout-t0.7: Python was 35 % of plain decoding's
    time at --temp 0.7 there, 1 % greedy; bench/measured/xeon-20261126-sampling-step).
    """
    row = np.asarray(probs_row).reshape(-1)
    return inverse_cdf(row, block_sums(row), rng)


def block_sums(row: np.ndarray) -> np.ndarray:
    """A 1-D row's sums over consecutive _SAMPLE_BLOCK-token blocks (the last one shorter), in float64."""
    n = row.size
    whole = n - n % _SAMPLE_BLOCK
    blocks = row[:whole].reshape(-1, _SAMPLE_BLOCK).sum(axis=1, dtype=np.float64)
    if whole < n:
        blocks = np.append(blocks, row[whole:].sum(dtype=np.float64))
    return blocks


def inverse_cdf(row: np.ndarray, blocks: np.ndarray, rng: np.random.Generator, without: int | None = None) -> int:
    """sample()'s draw, given the row's block sums; `without`: a position whose weight counts as
    zero (the row as it is if nothing else has weight, which only rounding reaches)."""
    zeroed_block = None
    if without is not None:
        b0 = without // _SAMPLE_BLOCK
        segment = row[b0 * _SAMPLE_BLOCK:(b0 + 1) * _SAMPLE_BLOCK].copy()
        segment[without - b0 * _SAMPLE_BLOCK] = 0
        rest = blocks.copy()
        rest[b0] = segment.sum(dtype=np.float64)
        if rest.sum() > 0.0:
            blocks, zeroed_block = rest, (b0, segment)
    cumulative = np.cumsum(blocks)
    total = cumulative[-1] if len(cumulative) else 0.0
    if not (total > 0 and math.isfinite(total)):
        raise ValueError(f"cannot sample from a row with total weight {total}")
    u = rng.random() * total
    # side="right": the first block (then token) whose running sum exceeds u, which skips zero weights.
    b = int(np.searchsorted(cumulative, u, side="right"))
    if b >= len(cumulative):  # u rounded up to exactly `total`: the last block that has any weight
        b = int(np.flatnonzero(blocks > 0)[-1])
    start = b * _SAMPLE_BLOCK
    segment = zeroed_block[1] if zeroed_block is not None and zeroed_block[0] == b else row[start:start + _SAMPLE_BLOCK]
    inside = (cumulative[b - 1] if b else 0.0) + np.cumsum(segment, dtype=np.float64)
    j = int(np.searchsorted(inside, u, side="right"))
    if j >= inside.size:
        # u at or past the block's end (its two sums round apart, or u rounded up to the total): the
        # block's last token that has any weight.
        j = int(np.flatnonzero(segment > 0)[-1])
    return start + j
