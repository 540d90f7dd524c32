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


class LazyProbabilities:
    """probabilities() of a (rows, vocab) logits block, a row at a time as it is read. Rejection
    sampling reads the rows up to its first rejection only, and each row's transform costs about
    0.5 ms with a 152k vocabulary on the 2-core machine (~1 % of a step there, far more of a GPU's),
    so a rejected draft of 8 no longer pays for 8 rows it never looks at. Rows are independent,
    so each is exactly the row the whole block would give."""

    def __init__(self, logits: np.ndarray, params: SamplingParams):
        self.logits, self.params = logits, params
        self.ndim, self.shape = 2, logits.shape
        self._rows: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, i: int) -> np.ndarray:
        row = self._rows.get(i)
        if row is None:
            row = self._rows[i] = probabilities(self.logits[i:i + 1], self.params)[0]
        return row

    @property
    def computed(self) -> int:
        """How many rows were transformed (the tests' check that the rest were not)."""
        return len(self._rows)


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

    # 4. temperature, then softmax over the survivors. After subtracting the max the largest weight is
    #    exactly 1, so float32 cannot overflow; the row sums are taken in float64.
    # Capped so a denormal temperature gives greedy-like rows instead of 0 * inf = NaN at the max.
    inverse_temperature = np.float32(min(1.0 / params.temperature, 1e30))
    if columns is None and (keep is None or np.count_nonzero(keep) * 8 > keep.size):
        # Most of the vocabulary survives: one dense in-place pass beats gathering indices (and with
        # no filter at all, nothing is masked: a pass over the vocabulary fewer, ~0.1 ms).
        dense = candidates - row_max
        dense *= inverse_temperature
        np.exp(dense, out=dense)
        if keep is not None:
            dense *= keep
        dense *= (1.0 / dense.sum(axis=1, keepdims=True, dtype=np.float64)).astype(np.float32)
        return dense
    out = np.zeros((rows, vocab), dtype=np.float32)
    for r in range(rows):
        kept = np.arange(candidates.shape[1]) if keep is None else np.flatnonzero(keep[r])
        weights_r = np.exp((candidates[r, kept] - row_max[r]) * inverse_temperature)
        token_ids = kept if columns is None else columns[r, kept]
        out[r, token_ids] = weights_r / weights_r.sum(dtype=np.float64)
    return out


def _nucleus_floor(weights: np.ndarray, top_p: float) -> np.ndarray:
    """Per row, the smallest weight that still belongs to the top-p nucleus: keeping every weight >= it
    gives the smallest (up to ties) set whose share of the row's total reaches top_p."""
    rows, n = weights.shape
    needed = top_p * weights.sum(axis=1, dtype=np.float64)
    size = min(n, _NUCLEUS_CANDIDATES)
    # The largest `size` weights of each row in descending order: O(n) partition plus a small sort.
    head = np.sort(np.partition(weights, n - size, axis=1)[:, n - size :], axis=1)[:, ::-1]
    floors = _crossing_values(head, needed)

    # Nearly flat rows whose nucleus is bigger than the head: sort those rows completely.
    short = np.flatnonzero(head.sum(axis=1, dtype=np.float64) < needed) if size < n else []
    if len(short):
        full = np.sort(weights[short], axis=1)[:, ::-1]
        floors[short] = _crossing_values(full, needed[short])
    return floors


def _crossing_values(descending: np.ndarray, needed: np.ndarray, block: int = 256) -> np.ndarray:
    """For each row of descending values, the value at which the running sum first reaches `needed`.

    A float64 cumsum over 152k values is slow (no SIMD), so sum fixed-size blocks first (fast
    reduction), find the block where the running sum crosses, and run the cumsum inside that block only.
    """
    rows, n = descending.shape
    padded = np.zeros((rows, -(-n // block) * block), dtype=descending.dtype)
    padded[:, :n] = descending  # trailing zeros change no sum
    block_cumulative = np.cumsum(padded.reshape(rows, -1, block).sum(axis=2, dtype=np.float64), axis=1)

    crossings = np.empty(rows, dtype=descending.dtype)
    for r in range(rows):
        # The clamps only matter when rounding leaves the full sum a hair below `needed` (top_p near 1).
        b = min(int(np.searchsorted(block_cumulative[r], needed[r])), block_cumulative.shape[1] - 1)
        before = block_cumulative[r, b - 1] if b else 0.0
        inside = before + np.cumsum(padded[r, b * block : (b + 1) * block], dtype=np.float64)
        index = min(b * block + int(np.searchsorted(inside, needed[r])), n - 1)
        crossings[r] = descending[r, index]
    return crossings


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
    n = row.size
    whole = n - n % _SAMPLE_BLOCK
    blocks = row[:whole].reshape(-1, _SAMPLE_BLOCK).sum(axis=1, dtype=np.float64)
    if whole < n:
        blocks = np.append(blocks, row[whole:].sum(dtype=np.float64))
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
    inside = (cumulative[b - 1] if b else 0.0) + np.cumsum(row[start:start + _SAMPLE_BLOCK], dtype=np.float64)
    j = int(np.searchsorted(inside, u, side="right"))
    if j >= inside.size:
        # u at or past the block's end (its two sums round apart, or u rounded up to the total): the
        # block's last token that has any weight.
        j = int(np.flatnonzero(row[start:start + _SAMPLE_BLOCK] > 0)[-1])
    return start + j
