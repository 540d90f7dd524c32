"""What a drafter proposes for one sequence: its own module because both the drafters (who make
it) and the step's outcome (which records what was sent) need it, and neither needs the other."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Proposal:
    tokens: list[int]
    q: np.ndarray | None = None  # (len(tokens), vocab) when the drafter sampled
    confidence: list[float] | None = None  # per token: estimated P(accepted | the ones before accepted)
    source: str = ""  # the drafter that made it (filled in by the engine when empty)
