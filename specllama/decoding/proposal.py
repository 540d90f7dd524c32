"""What a drafter proposes for one sequence: its own module because both the drafters (who make
it) and the step's outcome (which records what was sent) need it, and neither needs the other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

# The odds from which a drafter's (calibrated) token counts as near-certain: see Proposal.certain.
NEAR_CERTAIN_ODDS = 0.85


@dataclass
class Proposal:
    tokens: list[int]
    q: np.ndarray | None = None  # (len(tokens), vocab) when the drafter sampled
    confidence: list[float] | None = None  # per token: estimated P(accepted | the ones before accepted)
    source: str = ""  # the drafter that made it (filled in by the engine when empty)
    # Leading tokens the drafter holds near-certain (a long exact match whose class has held so far;
    # a grammar's forced tokens): a policy sends them whatever its cost estimate says, so a wrong
    # or noisy estimate cannot stop the drafts that would correct it (the realised-speed check
    # still benches a source that loses).
    certain: int = 0
    # Per token, when the draft mixes sources (a drafter's tokens, then those a grammar forces:
    # grammar.py); None: every token is `source`'s.
    sources: list[str] | None = field(default=None, kw_only=True)

    def source_of(self, i: int) -> str:
        return self.sources[i] if self.sources is not None else self.source


def certain_lead(confidence: Sequence[float], limit: int) -> int:
    """How many leading tokens, at most `limit`, are at NEAR_CERTAIN_ODDS or more."""
    n = 0
    while n < min(limit, len(confidence)) and confidence[n] >= NEAR_CERTAIN_ODDS:
        n += 1
    return n


def still_certain(proposal: Proposal) -> int:
    """The near-certain lead left after a policy rescaled the confidence (a text whose drafts keep
    failing loses its claim): the leading tokens, up to the drafter's claim, still at NEAR_CERTAIN_ODDS."""
    return certain_lead(proposal.confidence or [], proposal.certain)
