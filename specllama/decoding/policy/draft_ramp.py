"""How far a free draft may reach on a text that has not yet shown how far its drafts hold.

The suffix drafter's odds blend its calibration (how matches of this kind did on earlier texts)
with this text's own record, and early in a text that record is thin: the calibration then carries
the edits' long copies (odds 0.91-0.98) into prose that only quotes its input. Traced on the blind
sets (bench/measured/vm-20261129-r17-probation, vm-20261129-r18-late-ramp), the losing bets were
near-certain drafts of 15-47 tokens on texts whose longest accepted run was 2-4 tokens: on this
2-core CPU a 48-row batch costs 17 plain steps, and it kept nothing.

So a text's free drafts grow with what it has held: at most FIRST tokens until one of its steps
accepted a run, then GROWTH times the longest run it accepted in one step; near-certain leads too,
until a run of PROVEN tokens shows this text copies (then they go as far as the match and the cost
cut let them, as before: the agentic replay's whole-file copies start with one). A run of 4 is not
proof: a blind set's edit repeating one logging line accepted 4, then lost a 47-token lead.
The cap comes after the cost cut (free_drafts.cut_free), not before it: cut first, a FIRST-token
draft priced on a fresh machine's prior was not worth sending where the whole copy was, and the
copy's first drafts sent nothing (the H200's costs: copies 1.73x -> 1.55x of plain; after, 1.77x).
Replayed from fresh costs (bench/measured/vm-20261129-r18-late-ramp): 21 recorded sets x 3 noise
seeds on this CPU 1.0776x -> 1.0802x of plain, the worst request's mean 0.967x -> 0.980x (set-seeds
with one under 0.97x: 35 -> 22); the H200's costs 1.1874x -> 1.1900x; three blind sets level or up,
their worst requests 0.956 / 0.954 / 0.949 -> 0.970 / 0.961 / 0.964; the r13 VM's learnt curve
1.1070x -> 1.1013x (its copies, on a slope extrapolated past 16 rows). Run for real on the tenth
blind set (ABBA, greedy and 0.7): 1.00 / 1.05x -> 0.98 / 1.02x and 1.00 / 1.05x -> 1.01 / 1.03x of
plain, within this machine's noise; a 31-token summary was the ramp's worst prompt in both greedy runs.
"""

from __future__ import annotations

from specllama.decoding.drafters import Proposal
from specllama.decoding.outcome import StepOutcome

FIRST = 4  # tokens a free draft may send before this text accepted a run
GROWTH = 4  # then up to this many times the longest run it accepted in one step
PROVEN = 8  # a run this long: near-certain leads are no longer capped


class DraftRamp:
    """One text's longest accepted run of free-draft tokens, and the cap it sets."""

    def __init__(self) -> None:
        self.longest = 0

    def cap(self, proposal: Proposal) -> Proposal:
        """The draft cut to what this text has earned (its near-certain lead whole once proven)."""
        n = max(FIRST, GROWTH * self.longest)
        if self.longest >= PROVEN:
            n = max(n, proposal.certain)
        return proposal.keep(n)

    def observe(self, outcome: StepOutcome, drafter: str) -> None:
        """A step was judged: the run of `drafter`'s own tokens it accepted, if it sent any. A grammar's
        forced tokens after them (grammar.py appends them, sure) say nothing of how far this text copies."""
        own = sum(outcome.sent.source_of(i) == drafter for i in range(outcome.n_accepted))
        self.longest = max(self.longest, own)
