"""`-k auto` for a free drafter that says how sure it is of each token (the suffix drafter).

It is asked for all it matched, up to K_AUTO_MAX (K_COPY_MAX inside a near-certain copy), with a
confidence per token that already follows this text (the suffix drafter blends its calibration
with the text's own record: acceptance.TextRecord), and the draft is cut where it pays on the live
costs (free_drafts.py).
A source whose drafts realise less than plain decoding on this text is benched for a while
(realised.py), whatever its estimates say."""

from __future__ import annotations

from specllama.decoding.drafters import Drafter, Proposal
from specllama.decoding.outcome import StepOutcome
from specllama.decoding.policy.base import NO_DRAFT, Ask, PolicyBase, PolicyKit
from specllama.decoding.policy.draft_ramp import DraftRamp
from specllama.decoding.policy.free_drafts import cut_free, fully_known, long_enough
from specllama.decoding.realised import RealisedSpeed
from specllama.decoding.request import K_COPY_MAX


class ConfidentAuto(PolicyBase):
    name = "confident-auto"
    adaptive = True

    def __init__(self, drafter: Drafter, kit: PolicyKit):
        self.drafter, self.kit = drafter, kit
        self.drafters = (drafter,)
        self.realised = RealisedSpeed()
        self.ramp = DraftRamp()  # how far this text's drafts may reach (draft_ramp.py)

    def ask(self, room: int, alone: bool) -> Ask:
        if self.drafter.name in self.realised.avoid() | self.realised.not_asked():
            return NO_DRAFT
        return Ask(self.drafter, min(room, K_COPY_MAX))

    def review(self, proposal: Proposal) -> tuple[Proposal, Ask | None]:
        return long_enough(proposal), None

    def cut(self, proposal: Proposal) -> tuple[Proposal, bool]:
        proposal = proposal.keep(self.realised.allowed(proposal.source, len(proposal.tokens)))
        if proposal.tokens:
            proposal = self.ramp.cap(cut_free(proposal, self.kit.costs.step_ratio, self.kit.verifier.batch_tokens))
        return proposal, fully_known(proposal)

    def observe(self, outcome: StepOutcome) -> None:
        self.ramp.observe(outcome, self.drafter.name)
        self.realised.tick(outcome.source)
        if outcome.alone:
            self.realised.observe_step(outcome)
