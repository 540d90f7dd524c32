"""`-k auto`: choose each step's draft length from this machine's measured costs.

Per draft position i the chooser keeps two acceptance estimates, P(draft i accepted | reached):
a fast one that follows the text (a burst of boilerplate, a stretch of prose) and a slow one, the
drafter's long-run record. Each step it picks the K, 0 included, that maximises expected tokens
per unit of time:

    E(K)    = 1 + a1 + a1*a2 + ... + a1*...*aK       tokens per step (accepted drafts + the target's)
    cost(K) = K*c + T(K+1)/T(1)                        in one-token target decodes; K = 0 costs 1

Each new prompt restarts the fast estimates between the record and an optimistic prior, and positions a step did
not reach (K was smaller, the draft stopped at p_min, lookup found nothing) drift from the fast
estimate back towards the slow one. So after a bad patch has driven K to 0,
speculation is tried again once the drafter's long-run record says it should pay, and never when
the drafter has never paid: there are no blind probes that would cost time on a machine where
speculation loses.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from specllama.decoding.cost_curve import step_cost
from specllama.decoding.draft_length import expected_tokens


def causal_tokens(k: int) -> int:
    return k + 1  # [last] + K drafts in one causal batch


FAST_DECAY = 0.8  # weight of the old estimate per observation: follows the text within a few steps
SLOW_WINDOW = 50  # the long-run record averages about this many observations per position...
PRIOR_WEIGHT = 2  # ...and the prior counts as this many, so evidence overrules it quickly
DRIFT = 0.06  # per step, how far an unobserved fast estimate moves back towards the slow one


@dataclass
class AdaptiveK:
    verify_ratio: Callable[[int], float | None]  # n -> T(n)/T(1); None beyond what was measured
    draft_cost: float  # c: one draft token, in one-token target decodes (0 for prompt lookup)
    k_max: int = 8
    # The acceptance a drafter is assumed to have before any evidence: one that would pay at this
    # rate is tried until evidence says otherwise (a pessimistic prior would never draft, so never
    # learn); PRIOR_WEIGHT keeps such a trial short. Measured on the 2-core machine: at 0.95 the
    # Q4_0 draft was tried on every prompt and those trials cost 4 % overall (0.96x), for the rare
    # text where it pays by 2 %; at 0.9 a draft is tried only where verification is cheap enough
    # that 90 % acceptance wins, which keeps -k auto at plain decoding's speed here.
    prior: float = 0.9
    verify_tokens: Callable[[int], int] = causal_tokens  # the engine swaps in stairs' count when verifying by stairs
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

    def for_text(self) -> "AdaptiveK":
        """A chooser for one text among several generated at once: its own fast estimates
        (restarted as new_text does), the long-run record shared with this one (the same lists,
        so every text's observations land in it)."""
        view = replace(self, fast=list(self.fast), slow=self.slow, seen=self.seen)
        view.new_text()
        return view

    def expected_tokens(self, k: int) -> float:
        return expected_tokens(self.fast[:k])[-1]

    def cost(self, k: int) -> float | None:
        return step_cost(self.verify_ratio, k, self.draft_cost, self.verify_tokens(k))

    def rate(self, k: int) -> float | None:
        cost = self.cost(k)
        return None if cost is None else self.expected_tokens(k) / cost

    def choose(self) -> int:
        best_k, best_rate = 0, 1.0
        for k in range(1, self.k_max + 1):
            rate = self.rate(k)
            if rate is not None and rate > best_rate:
                best_k, best_rate = k, rate
        return best_k

    def observe(self, drafted: int, accepted: int) -> None:
        """One step's outcome: of `drafted` proposals the first `accepted` passed."""
        judged = min(drafted, accepted + 1)  # the accepted ones and the first rejection; later ones were never judged
        for i in range(self.k_max):
            if i < judged:
                hit = 1.0 if i < accepted else 0.0
                self.fast[i] = FAST_DECAY * self.fast[i] + (1 - FAST_DECAY) * hit
                # A running mean (prior included) until the window fills, then an average over the window.
                self.seen[i] += 1
                weight = max(1 / (PRIOR_WEIGHT + self.seen[i]), 1 / SLOW_WINDOW)
                self.slow[i] += weight * (hit - self.slow[i])
            else:
                self.fast[i] += DRIFT * (self.slow[i] - self.fast[i])

    def best_possible_rate(self) -> float:
        """The rate at 100 % acceptance: at or below 1, this drafter can never pay on this machine."""
        rates = [(k + 1) / c for k in range(1, self.k_max + 1) if (c := self.cost(k)) is not None]
        return max(rates, default=1.0)
