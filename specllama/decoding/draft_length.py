"""How many of a confident drafter's tokens to send for verification, and how sure it really is.

A model-free drafter knows, per proposed token, how often that continuation followed the matched
context (a raw confidence). `Calibrator` turns raw confidences into acceptance probabilities
learnt from verification; `choose_draft_length` then picks the length that maximises expected
tokens per unit of time. Accepting draft i needs drafts 1..i-1 accepted too, so with calibrated
per-token probabilities a_1..a_K:

    E(k)    = 1 + sum_{i<=k} prod_{j<=i} a_j        tokens per step (accepted drafts + the target's)
    cost(k) = k*c + T(k+1)/T(1)                      one step in one-token target decodes (c = 0 here)

and k* = argmax E(k)/cost(k) over k = 0..K, k = 0 being plain decoding (E = 1, cost = 1). The
argmax is taken over every k rather than "extend while the next token pays for itself", because a
cost curve with steps (batch sizes that cost the same, then a jump) can make one more token a loss
and three more a gain; ties go to the shorter draft.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence


def expected_tokens(acceptance: Sequence[float]) -> list[float]:
    """E(0..K) for per-token acceptance probabilities a_1..a_K (chained)."""
    out, chain, total = [1.0], 1.0, 1.0
    for a in acceptance:
        chain *= min(1.0, max(0.0, a))
        total += chain
        out.append(total)
    return out


def choose_draft_length(acceptance: Sequence[float], ratio: Callable[[int], float | None],
                        draft_cost: float = 0.0, min_gain: float = 1.0) -> int:
    """The k in 0..len(acceptance) maximising E(k) / (k*draft_cost + ratio(k+1)); lengths whose
    verify batch was never measured (ratio None) are not considered. A draft must promise at least
    `min_gain` times plain decoding's rate, else k = 0."""
    plain = 1.0 / (ratio(1) or 1.0)
    best_k, best_rate = 0, plain
    for k, e in enumerate(expected_tokens(acceptance)):
        if k == 0:
            continue
        r = ratio(k + 1)
        if r is None:
            break
        rate = e / (k * draft_cost + r)
        if rate > best_rate + 1e-12:
            best_k, best_rate = k, rate
    return best_k if best_rate >= plain * min_gain else 0


@dataclass
class CalibrationBin:
    group: int
    low: float
    high: float
    predicted: float  # what the calibrator now maps this bin to
    observed: float | None  # accepted / judged, None before any judgement
    count: int


@dataclass
class Calibrator:
    """Raw confidence -> observed acceptance, per group (e.g. a match-length class) and per bin of
    raw confidence. Each bin starts from a prior of `prior_weight` pseudo-observations at the bin's
    midpoint (an uncalibrated drafter is taken at its word) and moves to the observed rate as
    judgements arrive: predicted = (accepted + w*mid) / (judged + w)."""
    bins: int = 10
    groups: int = 1
    prior_weight: float = 4.0
    accepted: list[list[int]] = field(default_factory=list)
    judged: list[list[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.accepted = self.accepted or [[0] * self.bins for _ in range(self.groups)]
        self.judged = self.judged or [[0] * self.bins for _ in range(self.groups)]

    def _bin(self, raw: float) -> int:
        return min(self.bins - 1, max(0, int(raw * self.bins)))

    def _group(self, group: int) -> int:
        return min(self.groups - 1, max(0, group))

    def predict(self, raw: float, group: int = 0) -> float:
        g, b = self._group(group), self._bin(raw)
        mid = (b + 0.5) / self.bins
        return (self.accepted[g][b] + self.prior_weight * mid) / (self.judged[g][b] + self.prior_weight)

    def calibrate(self, raw: Sequence[float], group: int = 0) -> list[float]:
        return [self.predict(c, group) for c in raw]

    def update(self, raw: float, accepted: bool, group: int = 0) -> None:
        g, b = self._group(group), self._bin(raw)
        self.judged[g][b] += 1
        self.accepted[g][b] += int(accepted)

    def observe(self, raw: Sequence[float], n_sent: int, n_accepted: int, group: int = 0) -> None:
        """After a verification: drafts 1..n_accepted were accepted, draft n_accepted+1 (if sent)
        was rejected, later ones were never judged (their fate says nothing about them)."""
        for i in range(min(n_sent, n_accepted + 1, len(raw))):
            self.update(raw[i], i < n_accepted, group)

    def report(self) -> list[CalibrationBin]:
        rows = []
        for g in range(self.groups):
            for b in range(self.bins):
                n = self.judged[g][b]
                rows.append(CalibrationBin(g, b / self.bins, (b + 1) / self.bins,
                                           self.predict((b + 0.5) / self.bins, g),
                                           self.accepted[g][b] / n if n else None, n))
        return rows


@dataclass
class TextFit:
    """How this text's drafts fare against what the calibrator predicted for them: the calibrator
    learns across texts (a code answer and a French essay share its bins), but acceptance at the
    same raw confidence differs a lot between texts (measured on bench/prompts.jsonl: 0.20 on an
    explanation, 0.81 on a summary). factor = (accepted + w) / (predicted + w) over the recent
    judgements (each older one weighs `decay` as much), w pseudo-judgements of "as predicted"."""
    decay: float = 0.9  # ~10 judgements of memory: a text's character shows within a few steps
    prior_weight: float = 2.0
    accepted: float = 0.0
    predicted: float = 0.0

    @property
    def factor(self) -> float:
        return (self.accepted + self.prior_weight) / (self.predicted + self.prior_weight)

    def apply(self, confidence: Sequence[float], cap: float = 0.99) -> list[float]:
        f = self.factor
        return [min(cap, c * f) for c in confidence]

    def idle(self, relax: float = 0.97) -> None:
        """A step without a draft: the record fades toward "as predicted" (a text that stopped
        drafting because its first drafts failed gets another try some 20-30 steps later, e.g.
        when the answer turns from prose to quoting the prompt)."""
        self.accepted *= relax
        self.predicted *= relax

    def observe(self, confidence: Sequence[float], n_sent: int, n_accepted: int) -> None:
        """Drafts 1..n_accepted accepted, draft n_accepted+1 rejected; later ones never judged."""
        for i in range(min(n_sent, n_accepted + 1, len(confidence))):
            self.accepted = self.accepted * self.decay + (1.0 if i < n_accepted else 0.0)
            self.predicted = self.predicted * self.decay + confidence[i]
