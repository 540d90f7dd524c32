"""The target's rows as rejection sampling reads them (decoding/verify.py): one token's probability,
a draw from a row, a draw from a row with one token taken out, or a whole normalised row.

Why not normalised rows throughout: a plain step at a temperature draws one token from a 152k-float
row, and each pass over such a row costs ~35 us in a real run (the decode before it leaves the caches
cold): normalising the row, then summing it again to draw, made judging a plain step at --temp 0.7 take
0.34 ms on the 2-core machine, 0.16-0.19 ms this way (bench/measured/vm-20261128-r9-sampled-step); on
the lent H200, whose step is ~2.9 ms at 0.7, Python was 23 % of plain decoding's time
(bench/measured/lent-20261127-r2-gpu-heldout-t0.7). Here a row is its unnormalised weights, and where a
real model's weight sits on a few tokens, only those few are worked out: at a temperature alone (PeakedRow)
and under top-k, top-p and min-p (peaked_filtered)."""

from __future__ import annotations

import math

import numpy as np

from specllama.decoding.sampling import (
    NUCLEUS_HEAD_WEIGHT,
    SamplingParams,
    block_sums,
    inverse_cdf,
    inverse_temperature,
    kept_weights,
    nucleus_crossing,
    probabilities,
    tempered,
)


class TargetRows:
    """(rows, vocab) target probabilities, read a token or a draw at a time."""

    ndim = 2
    shape: tuple[int, int]

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, i: int) -> np.ndarray:
        """Row i, normalised (the residual against a draft model's q reads it whole)."""
        raise NotImplementedError

    def prob(self, i: int, token: int) -> float:
        raise NotImplementedError

    def prob_range(self, i: int, token: int) -> tuple[float, float]:
        """Bounds on prob(i, token), as tight as the row knows without working out its whole total
        (rejection sampling asks prob() only when its uniform falls between them)."""
        p = self.prob(i, token)
        return p, p

    def draw(self, i: int, rng: np.random.Generator, without: int | None = None) -> int:
        """A token from row i; with `without`, from the row with that token's weight removed and
        the rest renormalised (the row itself if nothing else has weight, which only rounding reaches)."""
        raise NotImplementedError


class GivenProbabilities(TargetRows):
    """Rows given as probabilities, read as they are."""

    def __init__(self, rows: np.ndarray):
        self.rows, self.ndim, self.shape = rows, rows.ndim, rows.shape

    def __getitem__(self, i: int) -> np.ndarray:
        return self.rows[i]

    def prob(self, i: int, token: int) -> float:
        return float(self.rows[i][token])

    def draw(self, i: int, rng: np.random.Generator, without: int | None = None) -> int:
        row = np.asarray(self.rows[i]).reshape(-1)
        return inverse_cdf(row, block_sums(row), rng, without)


class LazyProbabilities(TargetRows):
    """The rows of a (rows, vocab) logits block after `probabilities()`'s transform, each worked out
    when first read: rejection sampling reads the rows up to its first rejection only, so a rejected
    draft of 8 does not pay for 8 rows it never looks at. `rows[i]` is the exact row `probabilities()`
    gives the whole block (rows are independent); prob() and draw() read the same distribution from
    the row's unnormalised weights."""

    def __init__(self, logits: np.ndarray, params: SamplingParams):
        self.logits, self.params = logits, params
        self.shape = logits.shape
        self._rows: dict[int, np.ndarray] = {}
        self._weights: dict[int, KeptWeights | PeakedRow] = {}

    def __getitem__(self, i: int) -> np.ndarray:
        row = self._rows.get(i)
        if row is None:
            row = self._rows[i] = probabilities(self.logits[i:i + 1], self.params)[0]
        return row

    def prob(self, i: int, token: int) -> float:
        return self._row(i).prob(token)

    def prob_range(self, i: int, token: int) -> tuple[float, float]:
        row = self._row(i)
        return row.prob_range(token) if isinstance(row, PeakedRow) else super().prob_range(i, token)

    def draw(self, i: int, rng: np.random.Generator, without: int | None = None) -> int:
        return self._row(i).draw(rng, without)

    @property
    def computed(self) -> int:
        """How many rows were worked out (the tests' check that the rest were not)."""
        return len(self._rows.keys() | self._weights.keys())

    def _row(self, i: int) -> KeptWeights | PeakedRow:
        row = self._weights.get(i)
        if row is None:
            row = self._weights[i] = row_weights(self.logits[i], self.params)
        return row


def row_weights(logits: np.ndarray, params: SamplingParams) -> "KeptWeights | PeakedRow":
    """One row of logits as `probabilities()` weighs it, worked out the cheapest way that stays exact:
    at a temperature alone a PeakedRow, under filters peaked_filtered's few tokens, else the whole row's
    kept weights (greedy: the argmax alone)."""
    x = np.asarray(logits, dtype=np.float32).reshape(1, -1)
    if params.greedy:
        return KeptWeights(np.array([int(np.argmax(x[0]))]), np.ones(1, dtype=np.float32))
    if not 0 < params.top_k < x.shape[1] and params.top_p >= 1.0 and params.min_p <= 0.0:
        row = PeakedRow.of(x[0], params.temperature)  # a temperature alone
    else:
        row = peaked_filtered(x[0], params)  # filters on a peaked row: its few tokens
    if row is None:
        kept = kept_weights(x, params)
        row = KeptWeights(None, kept[0]) if isinstance(kept, np.ndarray) else KeptWeights(*kept[0])
    return row


class KeptWeights:
    """One row's kept tokens and their unnormalised weights: `ids` None for a vocabulary-sized row
    (weights indexed by token id), else the kept token ids (a top-k's few) with one weight each."""

    def __init__(self, ids: np.ndarray | None, weights: np.ndarray):
        self.ids, self.weights = ids, weights
        self._blocks: np.ndarray | None = None

    def blocks(self) -> np.ndarray:
        if self._blocks is None:
            self._blocks = block_sums(self.weights)
        return self._blocks

    def _at(self, token: int | None) -> int | None:
        """Where a token's weight is; None for no token, or one the filters dropped."""
        if token is None or self.ids is None:
            return token
        at = np.flatnonzero(self.ids == token)
        return int(at[0]) if len(at) else None

    def prob(self, token: int) -> float:
        at = self._at(token)
        weight = 0.0 if at is None else float(self.weights[at])
        return weight / float(self.blocks().sum()) if weight else 0.0

    def prob_range(self, token: int) -> tuple[float, float]:
        p = self.prob(token)
        return p, p

    def top_range(self) -> tuple[float, float]:
        """Bounds on the row's largest probability (a draft's p_min reads it)."""
        p = float(self.weights.max()) / float(self.blocks().sum())
        return p, p

    def normalised(self, vocab: int) -> np.ndarray:
        """The whole row, normalised, as `probabilities()` gives it (float32, `vocab` long)."""
        scale = np.float32(1.0 / float(self.blocks().sum()))
        if self.ids is None:
            return self.weights * scale
        row = np.zeros(vocab, dtype=np.float32)
        row[self.ids] = self.weights * scale
        return row

    def draw(self, rng: np.random.Generator, without: int | None = None) -> int:
        drawn = inverse_cdf(self.weights, self.blocks(), rng, self._at(without))
        return drawn if self.ids is None else int(self.ids[drawn])


class PeakedRow:
    """A row at a temperature alone (no filter), drawn from without a pass over its whole vocabulary.

    The tokens within COLD nats of the top (after the temperature) are "hot": their weights are
    worked out exactly, as `probabilities()` would. Every other token weighs less than e^-COLD, and
    a draw is rejection sampling against a proposal that gives each of them exactly that bound: a
    draw lands among the hot tokens with their exact weights, or (rarely: V * e^-COLD ~ 3e-4 of the
    proposal's mass on a 152k vocabulary) on a uniformly chosen cold token, kept with
    probability weight / bound, else the draw starts again. Each attempt's kept token follows the row
    exactly, so after a few failed attempts the whole-row draw finishes the job without bias.
    A row with more than an eighth of its vocabulary hot is not peaked and goes the whole-row way (`of`
    returns its KeptWeights). Measured on the real target's sampled answers (scripts/measure/peaked_rows.py): a
    median of 38 hot tokens of 152k at 0.7 (807 at 1.0), 17 of 500 rows not peaked at 0.7 (101 at 1.0,
    476 at 1.5; bench/measured/vm-20261128-r9-sampled-step)."""

    COLD = 20.0
    ATTEMPTS = 8

    def __init__(self, logits: np.ndarray, inverse_temperature: np.float32, top: np.float32, hot: np.ndarray,
                 threshold: np.float32):
        self.logits, self.inverse_temperature, self.top, self.threshold = logits, inverse_temperature, top, threshold
        self.hot = hot
        self.hot_weights = self._weights(logits[hot])
        self.hot_total = float(self.hot_weights.sum(dtype=np.float64))
        self.bound = math.exp(-self.COLD)
        # The proposal gives every token of the vocabulary the bound in its cold part; a pick that
        # lands on a hot token (or `without`) is a failed attempt, so each cold token weighs the bound.
        self.cold_mass = logits.size * self.bound
        self._whole: KeptWeights | None = None

    @classmethod
    def of(cls, logits: np.ndarray, temperature: float) -> "PeakedRow | KeptWeights":
        """The row as a PeakedRow, or, not peaked, as its whole weights (the max found once for both)."""
        inverse = inverse_temperature(temperature)
        top, threshold, hot = _hot(logits, cls.COLD * min(temperature, 1e30))
        if hot is None:
            return KeptWeights(None, tempered(logits, top, inverse))
        return cls(logits, inverse, top, hot, threshold)

    def _weights(self, logits: np.ndarray) -> np.ndarray:
        return tempered(logits, self.top, self.inverse_temperature)

    def whole(self) -> KeptWeights:
        """The whole row's weights (a pass over the vocabulary): for the exact total, and the fallback."""
        if self._whole is None:
            self._whole = KeptWeights(None, self._weights(self.logits))
        return self._whole

    def prob(self, token: int) -> float:
        return self.whole().prob(token)

    def prob_range(self, token: int) -> tuple[float, float]:
        """The token's weight over the hot total plus the most and the least the cold tokens can
        weigh: within ~3e-4 of each other on a real model's row, no pass over the vocabulary."""
        if self._whole is not None:
            p = self.prob(token)
            return p, p
        weight = float(self._weights(self.logits[token:token + 1])[0])
        return weight / (self.hot_total + (self.logits.size - self.hot.size) * self.bound), weight / self.hot_total

    def top_range(self) -> tuple[float, float]:
        """Bounds on the largest probability: the top token weighs 1, the total is bounded as in prob_range."""
        if self._whole is not None:
            return self._whole.top_range()
        return 1.0 / (self.hot_total + (self.logits.size - self.hot.size) * self.bound), 1.0 / self.hot_total

    def normalised(self, vocab: int) -> np.ndarray:
        return self.whole().normalised(vocab)

    def draw(self, rng: np.random.Generator, without: int | None = None) -> int:
        weights, hot_total = self.hot_weights, self.hot_total
        if without is not None:
            at = np.searchsorted(self.hot, without)
            if at < self.hot.size and self.hot[at] == without:
                weights = weights.copy()
                weights[at] = 0.0
                hot_total = float(weights.sum(dtype=np.float64))
        if hot_total > 0.0:
            cumulative = np.cumsum(weights, dtype=np.float64)
            vocab = self.logits.size
            for _ in range(self.ATTEMPTS):
                u = rng.random() * (hot_total + self.cold_mass)
                if u < hot_total:
                    i = min(int(np.searchsorted(cumulative, u, side="right")), self.hot.size - 1)
                    while weights[i] == 0.0:  # rounding at `without`'s zeroed weight: the one before it
                        i -= 1
                    return int(self.hot[i])
                token = int(rng.integers(vocab))
                if self.logits[token] >= self.threshold or token == without:
                    continue  # the proposal's cold part is the cold tokens other than `without` alone
                if rng.random() * self.bound < float(self._weights(self.logits[token:token + 1])[0]):
                    return token
        return self.whole().draw(rng, without)


def peaked_filtered(logits: np.ndarray, params: SamplingParams) -> KeptWeights | None:
    """top-k, top-p and min-p on a row whose temperature-1 weight sits on few tokens: the kept tokens
    and weights `kept_weights` gives (up to the order of the ids), found among the tokens within
    PeakedRow.COLD nats of the top (before the temperature, as the filters see the row), without a pass
    over the vocabulary beyond finding them. None where that cannot be settled so (a flat row; fewer hot
    tokens than top-k; a nucleus the cold tokens' mass could move; a min-p below the cold tokens'
    bound): the whole-row way then.

    Why it is the same set: the top-k of a row with at least k hot tokens are hot, and top-p after
    top-k renormalises over those k alone. Without top-k, the cold tokens together weigh at most their
    count times the heaviest weight a cold token can have, so the nucleus needs top_p times a total
    known to lie in [hot total, hot total + that bound]; where both ends cross at the same token, that
    token is the floor, and a floor above every cold weight keeps hot tokens only. Measured: judging a
    step inside real runs, bench/measured/vm-20261128-r9-sampled-step."""
    top, threshold, hot = _hot(logits, PeakedRow.COLD)
    if hot is None:
        return None
    candidates = logits[hot]
    # The heaviest a cold token can weigh: weights are monotone in the logit, float32 rounding included.
    cold_weight = float(np.exp(np.float32(threshold - top)))
    cold_mass = (logits.size - hot.size) * cold_weight  # at most; nothing once top-k has picked its k
    top_k = int(params.top_k)
    if 0 < top_k < logits.size:
        if hot.size < top_k:
            return None
        if top_k < hot.size:
            pick = np.argpartition(candidates, hot.size - top_k)[hot.size - top_k:]
            hot, candidates = hot[pick], candidates[pick]
        cold_mass = cold_weight = 0.0
    keep = np.ones(hot.size, dtype=bool)
    if params.top_p < 1.0:
        weights = np.exp(candidates - top)  # kept_weights' temperature-1 weights, token for token
        hot_total = float(weights.sum(dtype=np.float64))
        needed = [params.top_p * hot_total, params.top_p * (hot_total + cold_mass)]
        # The nucleus is usually a few of the hot tokens: sort the heaviest alone when they reach it
        # (the weights at or above a cut are a head of the descending order, as in sampling.py).
        head = weights[weights >= NUCLEUS_HEAD_WEIGHT]
        descending = np.sort(head if head.sum(dtype=np.float64) >= needed[1] else weights)[::-1]
        floors = [nucleus_crossing(descending, need) for need in needed]
        if floors[1] is None or floors[0] != floors[1] or not floors[0] > cold_weight:
            return None
        keep &= weights >= floors[0]
    if params.min_p > 0.0:
        floor = top + np.float32(math.log(params.min_p))
        if cold_mass and not floor > threshold:  # cold tokens could pass min-p
            return None
        keep &= candidates >= floor
    ids = hot[keep]
    return KeptWeights(ids, tempered(logits[ids], top, inverse_temperature(params.temperature)))


def _hot(logits: np.ndarray, cut: float) -> tuple[np.float32, np.float32, np.ndarray | None]:
    """The row's top, the threshold of the tokens within `cut` of it, and those tokens' ids; None for
    the ids where more than an eighth of the vocabulary is that close (not peaked: counted before
    listed, since listing 19k hot tokens costs a pass more). The threshold lies a hair below the exact
    cut, so a cold token's weight is below the bound even after float32 rounding (a token wrongly
    counted hot costs nothing: hot weights are exact)."""
    top = logits.max()
    threshold = np.float32(float(top) - cut - 1e-3 * (1.0 + cut + abs(float(top))))
    hot = logits >= threshold
    return top, threshold, (np.flatnonzero(hot) if np.count_nonzero(hot) * 8 <= logits.size else None)
