"""`-k auto` for the draft model: each step's length is the best on this text's per-position
acceptance and the live costs (acceptance.PositionAcceptance over cost/model.py), 0 when no
length pays. In a batch the planner sizes every such request's draft jointly from the `estimates`
its Ask carries.

A draft model that the estimates never let draft is tried now and then (`trying`) until the
engine has verified one draft: until then what a batch costs is the prior's word alone, and a prior
that says batches are dear (a startup benchmark on a busy machine, or the 16-core machine's, which
predicted 0.87x where auto ran at 1.27x) would never be put to the test: a fake backend with those
costs drafted nothing with the model (tests/unit/test_closed_loop.py). A try costs a step or two in
every TRY_EVERY at worst."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from specllama.decoding.drafters import Drafter, Proposal
from specllama.decoding.outcome import StepOutcome
from specllama.decoding.policy.base import NO_DRAFT, Ask, PolicyBase, PolicyKit
from specllama.decoding.policy.catch_up_price import CatchUpPrice, rate_with_catch_up
from specllama.decoding.realised import RealisedSpeed

TRY_DRAFT = 2  # the draft length of a try: 3 rows, the smallest batch most drafts use
TRY_EVERY = 48  # steps between tries (the planner's plain probes come as rarely)


class ModelAuto(PolicyBase):
    name = "model-auto"
    adaptive = True

    def __init__(self, drafter: Drafter, kit: PolicyKit):
        self.drafter, self.kit = drafter, kit
        self.drafters = (drafter,)
        self.acceptance = kit.record(drafter.name)  # this text's view of the drafter's record
        self.realised = RealisedSpeed()
        self.catch_up = CatchUpPrice(kit.costs)  # what the draft must decode first after sitting out

    def start(self, slot: int, prompt: Sequence[int]) -> None:
        self.catch_up.start(slot, prompt)
        # The draft digests the prompt only if a step may want drafts now (a long prompt costs the
        # draft seconds); its first proposal catches up by itself otherwise.
        if self.acceptance.choose() > 0:
            self.drafter.prefill(slot, prompt)

    def ask(self, room: int, alone: bool) -> Ask:
        if self.drafter.name in self.realised.avoid():
            return NO_DRAFT
        cap = min(room, self.acceptance.k_max)
        k = self.acceptance.choose()
        if k and (rate_with_catch_up(self.acceptance, k, self.catch_up.steps(self.drafter)) or 1.0) <= 1.0:
            k = 0  # it sat out: paying part of its catch-up, this step would lose
        k = self.realised.allowed(self.drafter.name, k or (TRY_DRAFT if self.trying(alone) else 0))
        return Ask(self.drafter, min(k, cap), self.acceptance.fast, self.acceptance.c, cap)

    def review(self, proposal: Proposal) -> tuple[Proposal, Ask | None]:
        if proposal.confidence is None:  # this text's per-position odds: what a batch's cut weighs it by
            proposal = replace(proposal, confidence=self.acceptance.fast[:len(proposal.tokens)])
        return proposal, None

    def trying(self, alone: bool) -> bool:
        """Whether this step drafts TRY_DRAFT tokens although the estimates say no length pays:
        only alone, while the engine has verified no draft at all and its costs were not learnt
        here before."""
        costs = self.kit.costs
        return (alone and not self.kit.engine.drafted and not costs.prior.learned
                and costs.steps % TRY_EVERY == TRY_EVERY // 2)

    def observe(self, outcome: StepOutcome) -> None:
        self.catch_up.grew(outcome.tokens)
        self.acceptance.observe(outcome.drafted, outcome.n_accepted, outcome.odds)
        self.realised.tick(outcome.source)
        if outcome.alone:
            self.realised.observe(outcome.source, outcome.emitted, outcome.seconds, outcome.t1)
