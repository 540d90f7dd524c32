"""How likely a draft is to be accepted: every acceptance estimate in one place.

- `PositionAcceptance`: per draft position i, P(draft i accepted | drafts before it accepted), for
  a drafter without its own confidence (the draft model). Two estimates: a fast one that follows the
  text (a burst of boilerplate, a stretch of prose) and a slow one, the drafter's long-run record,
  shared by every text (`for_text` gives a text its own fast estimates over the shared record).
  Each new prompt restarts the fast estimates between the record and an optimistic prior, and
  positions a step did not reach drift from the fast estimate back towards the slow one: after a
  bad patch has driven K to 0, speculation is tried again once the drafter's long-run record says
  it should pay, and never when the drafter has never paid.
- `Calibrator`: a confident drafter's raw per-token confidence (the suffix drafter: how often that
  continuation followed the matched context) -> acceptance observed, per match-length class.
- `TextRecord`: how this text's proposals fare, per match-length class, over the calibrator.

Nothing here decides a draft length: the cost model (cost/model.py) turns these estimates and the
step costs into one, for the planner.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from specllama.decoding.cost.model import Ratio, Rows, best_length, best_possible_rate, causal_rows, expected_tokens, step_cost

FAST_DECAY = 0.8  # weight of the old estimate per observation: follows the text within a few steps
SLOW_WINDOW = 50  # the long-run record averages about this many observations per position...
PRIOR_WEIGHT = 2  # ...and the prior counts as this many, so evidence overrules it quickly
DRIFT = 0.06  # per step, how far an unobserved fast estimate moves back towards the slow one


@dataclass
class PositionAcceptance:
    verify_ratio: Ratio  # n -> T(n)/T(1) (the engine's live StepCosts.ratio)
    # c: one draft token in plain steps; a callable reads the live estimate (StepCosts.draft_ratio)
    draft_cost: float | Callable[[], float | None]
    k_max: int = 8
    # The acceptance a drafter is assumed to have before any evidence: one that would pay at this
    # rate is tried until evidence says otherwise (a pessimistic prior would never draft, so never
    # learn); PRIOR_WEIGHT keeps such a trial short. Measured on the 2-core machine: at 0.95 the
    # Q4_0 draft was tried on every prompt and those trials cost 4 % overall (0.96x), for the rare
    # text where it pays by 2 %; at 0.9 a draft is tried only where verification is cheap enough
    # that 90 % acceptance wins, which keeps -k auto at plain decoding's speed here.
    prior: float = 0.9
    verify_tokens: Rows = causal_rows  # rows the request's verifier decodes for k drafts (policy/base.py sets it)
    fast: list[float] = field(default_factory=list)
    slow: list[float] = field(default_factory=list)
    seen: list[int] = field(default_factory=list)  # observations per position, for the slow record's weight

    def __post_init__(self) -> None:
        self.fast = self.fast or [self.prior] * self.k_max
        self.slow = self.slow or [self.prior] * self.k_max
        self.seen = self.seen or [0] * self.k_max

    def new_text(self) -> None:
        """A new prompt: what the last text taught the fast estimates may not hold (prompt lookup
        is useless on an explanation and excellent on a code edit), so they restart halfway between
        the drafter's long-run record and the optimistic prior: a fresh chance, shorter for a
        drafter with a poor record."""
        self.fast = [(self.prior + slow) / 2 for slow in self.slow]

    def for_text(self) -> "PositionAcceptance":
        """A chooser for one text among several generated at once: its own fast estimates
        (restarted as new_text does), the long-run record shared with this one (the same lists,
        so every text's observations land in it)."""
        view = replace(self, fast=list(self.fast), slow=self.slow, seen=self.seen)
        view.new_text()
        return view

    @property
    def c(self) -> float:
        """The draft token's cost now, in plain steps."""
        cost = self.draft_cost() if callable(self.draft_cost) else self.draft_cost
        return cost or 0.0

    def expected_tokens(self, k: int) -> float:
        return expected_tokens(self.fast[:k])[-1]

    def cost(self, k: int) -> float | None:
        return step_cost(self.verify_ratio, k, self.c, self.verify_tokens(k))

    def rate(self, k: int) -> float | None:
        cost = self.cost(k)
        return None if cost is None else self.expected_tokens(k) / cost

    def choose(self) -> int:
        """The draft length with the best rate on these estimates and today's costs (0: none pays)."""
        return best_length(self.fast, self.verify_ratio, self.c, rows=self.verify_tokens)

    def observe(self, drafted: int, accepted: int, odds: Sequence[float] = ()) -> None:
        """One step's outcome: of `drafted` proposals the first `accepted` passed. `odds` (the
        verifier's, one per judged draft) replace the 1/0 outcome where given: under sampling a
        draft is accepted with probability min(1, p/q), and that probability is what a rate
        estimate needs, without the coin flip's noise."""
        judged = min(drafted, accepted + 1)  # the accepted ones and the first rejection; later ones were never judged
        for i in range(self.k_max):
            if i < judged:
                hit = odds[i] if i < len(odds) else (1.0 if i < accepted else 0.0)
                self.fast[i] = FAST_DECAY * self.fast[i] + (1 - FAST_DECAY) * hit
                # A running mean (prior included) until the window fills, then an average over the window.
                self.seen[i] += 1
                weight = max(1 / (PRIOR_WEIGHT + self.seen[i]), 1 / SLOW_WINDOW)
                self.slow[i] += weight * (hit - self.slow[i])
            else:
                self.fast[i] += DRIFT * (self.slow[i] - self.fast[i])

    def best_possible_rate(self) -> float:
        """The rate at 100 % acceptance: at or below 1, this drafter can never pay on this machine."""
        return best_possible_rate(self.verify_ratio, self.c, self.k_max, self.verify_tokens)


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
    midpoint (an uncalibrated drafter is taken at its word), raised to its group's `floors` entry
    when one is given (what is known of a group before this run: see SuffixDrafter's COLD_FLOORS),
    and moves to the observed rate as judgements arrive: predicted = (accepted + w*prior) / (judged + w)."""
    bins: int = 10
    groups: int = 1
    prior_weight: float = 4.0
    floors: Sequence[float] = ()  # per group, the least a bin's prior is: the group's known acceptance
    accepted: list[list[float]] = field(default_factory=list)  # summed odds of acceptance (1/0 when greedy)
    judged: list[list[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.accepted = self.accepted or [[0] * self.bins for _ in range(self.groups)]
        self.judged = self.judged or [[0] * self.bins for _ in range(self.groups)]

    def _bin(self, raw: float) -> int:
        return min(self.bins - 1, max(0, int(raw * self.bins)))

    def _group(self, group: int) -> int:
        return min(self.groups - 1, max(0, group))

    def prior(self, b: int, g: int) -> float:
        mid = (b + 0.5) / self.bins
        return max(mid, self.floors[g]) if g < len(self.floors) else mid

    def predict(self, raw: float, group: int = 0) -> float:
        g, b = self._group(group), self._bin(raw)
        return (self.accepted[g][b] + self.prior_weight * self.prior(b, g)) / (self.judged[g][b] + self.prior_weight)

    def update(self, raw: float, accepted: float, group: int = 0) -> None:
        """One judged token: accepted 1 or 0, or the odds it was accepted with (under sampling)."""
        g, b = self._group(group), self._bin(raw)
        self.judged[g][b] += 1
        self.accepted[g][b] += float(accepted)

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
class TextRecord:
    """This text's own acceptance per group (the suffix drafter's draft group: match-length class and
    position in the draft), over what the calibrator predicts:
    the calibrator learns across texts (a code answer and a French essay share its bins), but at the
    same raw confidence acceptance differs a lot between texts (measured on bench/prompts.jsonl: 0.20
    on an explanation, 0.81 on a summary) and between the classes of one text (an edit's first turn
    breaks its long copies at every changed line while its short matches hold).
        predicted = (accepted + w * calibrated) / (judged + w)
    per group, over the whole text: w judgements in, the text's own record weighs as much as the
    calibrator. Fed every judged token of the drafter's proposals, sent or not (SuffixDrafter).

    It replaced one factor per text (accepted / predicted over all classes, lowered or raised alike)
    plus a copy reach that doubled after each copy accepted whole: replayed on recorded greedy
    answers (scripts/measure/policy_replay.py, bench/measured/vm-20261126-policy-replay-text-record.md),
    -k auto went from 1.175x to 1.197x of plain on the agentic replay's texts (worst request 0.92x ->
    1.01x) and from 1.186x to 1.245x on held-out edit sessions (0.87x -> 1.02x); prose within 0.5 %.
    W 4 / 8 / 16 gave 1.151 / 1.181 / 1.200x and 1.249 / 1.259 / 1.236x there: 8 is the middle. With
    groups by draft position too (2026-11-26, the replay on the measured verify costs): W 4 / 8 / 16
    1.313 / 1.354 / 1.305x and 1.347 / 1.346 / 1.327x."""
    weight: float = 8.0
    accepted: dict[int, float] = field(default_factory=dict)
    judged: dict[int, int] = field(default_factory=dict)

    def predict(self, calibrated: float, group: int) -> float:
        n = self.judged.get(group, 0)
        return (self.accepted[group] + self.weight * calibrated) / (n + self.weight) if n else calibrated

    def observe(self, group: int, hit: float) -> None:
        """One judged token of this text: 1/0, or the odds it was accepted with (under sampling)."""
        self.accepted[group] = self.accepted.get(group, 0.0) + float(hit)
        self.judged[group] = self.judged.get(group, 0) + 1
