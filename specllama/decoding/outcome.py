"""What one step did for one request: the record every learner reads (the request's policy, the
drafters' calibration, the realised-speed check), built once by the engine after the judge."""

from __future__ import annotations

from dataclasses import dataclass

from specllama.decoding.proposal import Proposal


@dataclass(frozen=True)
class StepOutcome:
    asked: int  # drafts the policy planned for (0: a step without a draft)
    sent: Proposal  # what the target verified, after every cut (tokens, confidence, source)
    n_accepted: int
    # Per judged draft position (the accepted ones and the first rejection), the probability that
    # the target accepts that token given the ones before it, as the verifier saw it: 1 or 0 when
    # greedy, p(x) for a deterministic draft under sampling (modified rejection sampling accepts it
    # with exactly that probability), min(1, p(x)/q(x)) for a sampled one. An acceptance estimate
    # fed these learns a sampled text's odds from every step instead of from coin flips.
    odds: tuple[float, ...]
    seconds: float  # the whole step's time, drafting included
    t1: float | None  # a plain step's time at this moment, the realised check's yardstick
    alone: bool  # the only request in the step, so `seconds` were spent on it alone
    # What the step committed to the request's text: the accepted drafts and the target's token,
    # cut where the text ended (end of generation, a stop string, max_tokens), and their text as
    # streamed (a split character or a possible stop string's start is held back until complete).
    tokens: tuple[int, ...] = ()
    text: str = ""
    # Seconds this request's commit spent dropping its rejected drafts from the target's cache
    # (a restore and a replay decode on a recurrent model: llama/rollback.py), part of `seconds`.
    t_rollback: float = 0.0
    # Seconds the step spent asking drafters for proposals (part of `seconds`; every request's in a
    # batch): what asking cost, paid whether or not a draft was sent.
    t_draft: float = 0.0

    @property
    def drafted(self) -> int:
        return len(self.sent.tokens)

    @property
    def source(self) -> str:
        """The drafter whose tokens were verified; "" for a step without a draft."""
        return self.sent.source if self.sent.tokens else ""

    @property
    def asked_source(self) -> str:
        """The drafter whose proposal this step ended with, sent or cut to nothing ("": none asked)."""
        return self.sent.source

    @property
    def emitted(self) -> int:
        """Tokens the step gained: the accepted drafts and the target's own."""
        return self.n_accepted + 1
