"""How much one request's drafts may put at risk: a draft is sent only if its losing every token would
leave the request's drafting no more than ALLOWANCE plus SHARE of its plain steps behind plain decoding,
counting what its drafts won so far.

Why: a draft is sent on its expected gain, and on 2 CPU cores, where verifying 9 rows costs 4.5 plain
steps, an 8-token suffix draft at 0.9 odds a token promises +1.3 plain steps and loses 3.5 when its
first token is wrong. Many such bets pay; a 96-token prose answer holds one to three of them, so one
unlucky answer loses 4-7 % to its drafts (at --temp 0.7: emoji, three drafts of 3-8 tokens at 0.84-0.93
odds, one token kept, -5.0 % of its time; bench/measured/vm-20261128-r12-loss-budget). A bet sized to
what the request can afford (a bankroll's rule) keeps such an answer's worst case near plain decoding,
while a text that copies wins its room with its first accepted drafts and then drafts as before.
Free drafts only (the suffix drafter's, whose losses these were): a decoding source's length follows
its per-position record, which the realised check benches within a few steps when it loses.
The near-certain lead of a copy (Proposal.certain, up to free_drafts.CERTAIN_FLOOR) is sent whatever
the budget says, as it is whatever the costs say: that is where the gains are, and it seldom fails.
"""

from __future__ import annotations

from typing import Callable

from specllama.decoding.cost.model import Ratio, Rows
from specllama.decoding.outcome import StepOutcome

# Plain steps a request's drafts may lose before they won any, and the share of the plain steps it has
# run (its tokens: a plain step makes one) they may lose on top.
ALLOWANCE = 2.0
SHARE = 0.02
import os  # TEMPORARY for replays
ALLOWANCE = float(os.environ.get("LB_ALLOWANCE", ALLOWANCE))
SHARE = float(os.environ.get("LB_SHARE", SHARE))


class LossBudget:
    """One request's drafting account: what its drafts won (tokens over what their steps cost, in plain
    steps) and how long a draft it can still afford to lose whole."""

    def __init__(self, source: str) -> None:
        self.source = source  # the free drafter whose drafts it accounts for
        self.tokens = 0
        self.net = 0.0

    def start(self) -> None:
        self.tokens, self.net = 0, 0.0

    def observe(self, outcome: StepOutcome) -> None:
        self.tokens += outcome.emitted
        # Its own drafts only (a draft model's losses are its record's to judge), and a step shared with
        # other requests costs them all: its seconds are not this request's alone.
        if outcome.source == self.source and outcome.alone and outcome.t1:
            self.net += outcome.emitted - outcome.seconds / outcome.t1

    @property
    def room(self) -> float:
        """Plain steps a draft may lose now."""
        return ALLOWANCE + SHARE * self.tokens + self.net

    def longest(self, cost: Callable[[int], float | None], most: int) -> int:
        """The longest draft of at most `most` tokens whose step, at `cost(k)` plain steps, would lose at
        most `room` if it kept only the target's own token (k = 0 always may). Costs are not monotone
        (a block of rows can cost less than the count before it), so every length is looked at."""
        room = self.room
        longest = 0
        for k in range(1, most + 1):
            c = cost(k)
            if c is not None and c - 1.0 <= room:
                longest = k
        return longest

    def free(self, ratio: Ratio, rows: Rows, most: int) -> int:
        """The longest free draft (one that costs no decode: only its verify rows) of at most `most`."""
        return self.longest(lambda k: ratio(rows(k)), most)
