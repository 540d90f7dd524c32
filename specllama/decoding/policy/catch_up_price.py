"""What a decoding source (the draft model) that sat out must decode of the text before it drafts
again, priced for the policies that choose it (source_choice.py, model_auto.py).

Why: a source that sat out has not decoded the text since (the draft model catches up on its first
proposal), and that catch-up is not a draft position's cost: unpriced, `auto` chose a one-token
draft-model draft in the middle of a 64-token answer at --temp 0.7 and first decoded the ~100 tokens
the draft had not seen, a 270 ms step, 16.8 % of that prompt's time
(bench/measured/vm-20261128-r11-draft-rows, new-r2, german)."""

from __future__ import annotations

from typing import Sequence

from specllama.decoding.acceptance import PositionAcceptance
from specllama.decoding.cost.online import StepCosts
from specllama.decoding.drafters import Drafter

# The share of a catch-up the step that catches up pays: the steps it drafts after share the rest.
# Priced whole (1.0), a source that sat out a copy could hardly come back; 0 is the unpriced case above.
CATCH_UP_SHARE = 0.5


class CatchUpPrice:
    """One request's text so far, and what catching a drafter up on it costs now, in plain steps."""

    def __init__(self, costs: StepCosts):
        self.costs = costs
        self.slot = 0
        self.text: list[int] = []

    def start(self, slot: int, prompt: Sequence[int]) -> None:
        self.slot, self.text = slot, list(prompt)

    def grew(self, tokens: Sequence[int]) -> None:
        """A step committed these tokens."""
        self.text.extend(tokens)

    def steps(self, drafter: Drafter) -> float:
        t1 = self.costs.t1()
        return drafter.catch_up_seconds(self.slot, self.text) / t1 if t1 else 0.0


def rate_with_catch_up(record: PositionAcceptance, k: int, behind: float) -> float | None:
    """A decoding source's rate at K drafts when its step also pays CATCH_UP_SHARE of a catch-up of
    `behind` plain steps; None where its cost is unknown."""
    cost = record.cost(k)
    return None if not cost else record.expected_tokens(k) / (cost + behind * CATCH_UP_SHARE)
