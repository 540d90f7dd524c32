"""`-k auto` for a free drafter that says how sure it is of each token (the suffix drafter).

It is asked for all it matched, up to K_AUTO_MAX (K_COPY_MAX inside a near-certain copy); its
calibrated confidence is scaled by how this text's drafts have fared so far (acceptance.TextFit: a
French essay and a code edit differ a lot at the same raw confidence), and the draft is cut where
it pays on the live costs (free_drafts.py).
A source whose drafts realise less than plain decoding on this text is benched for a while
(realised.py), whatever its estimates say."""

from __future__ import annotations

from dataclasses import replace

from specllama.decoding.acceptance import TextFit
from specllama.decoding.drafters import Drafter, Proposal
from specllama.decoding.outcome import StepOutcome
from specllama.decoding.policy.base import NO_DRAFT, Ask, PolicyBase, PolicyKit
from specllama.decoding.policy.free_drafts import CopyRun, cut_free, fully_known, long_enough
from specllama.decoding.proposal import still_certain
from specllama.decoding.realised import RealisedSpeed
from specllama.decoding.request import K_COPY_MAX


class ConfidentAuto(PolicyBase):
    name = "confident-auto"
    adaptive = True

    def __init__(self, drafter: Drafter, kit: PolicyKit):
        self.drafter, self.kit = drafter, kit
        self.drafters = (drafter,)
        self.fit = TextFit()  # this text's drafts against their calibrated confidence
        self.realised = RealisedSpeed()
        self.copy_run = CopyRun()

    def ask(self, room: int, alone: bool) -> Ask:
        if self.drafter.name in self.realised.avoid():
            return NO_DRAFT
        return Ask(self.drafter, min(room, K_COPY_MAX))

    def review(self, proposal: Proposal) -> tuple[Proposal, Ask | None]:
        if proposal.confidence is not None:
            proposal = replace(proposal, confidence=self.fit.apply(proposal.confidence))
            proposal = replace(proposal, certain=still_certain(proposal))
        return long_enough(proposal), None

    def cut(self, proposal: Proposal) -> tuple[Proposal, bool]:
        if proposal.tokens:
            proposal = cut_free(proposal, self.kit.costs.ratio, self.kit.verifier.batch_tokens, self.copy_run.reach)
        return proposal, fully_known(proposal)

    def observe(self, outcome: StepOutcome) -> None:
        if outcome.drafted:
            self.fit.observe(outcome.sent.confidence or [], outcome.drafted, outcome.n_accepted, outcome.odds)
            self.copy_run.observe(outcome.sent, outcome.n_accepted)
        else:
            self.fit.idle()
        self.realised.tick()
        if outcome.alone:
            self.realised.observe(outcome.source, outcome.emitted, outcome.seconds, outcome.t1)
