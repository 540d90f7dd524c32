"""What the requests of one step share: the batch's rows. Each request's own decision (which
source, how many drafts) is its draft policy's (policy/); the planner coordinates them.

Before drafting, `asks` gives each policy its room (the context, its max tokens, its verifier's
limit) and collects what it asks for; when several requests share the decode (a draft row delays
every other request's token) the lengths of those that size their drafts on per-position
acceptance (the draft model's) are chosen jointly on the batch's costs (cost/model.choose_lengths),
and exact mode's row limit is applied to the whole batch. After drafting, `cut` lets each policy
make its own cut, then cuts the drafts that carry a confidence per token jointly on the batch's
costs (measured on bench/prompts_similar.jsonl at --parallel auto before this: drafts sized as if
each request were alone made the job 0.89-1.05x of plain decoding's). The rows a draft costs are
always the request's verifier's own (`batch_tokens`).

T(1), the yardstick of every estimate, is kept current: every PROBE_EVERY steps without a plain
step, a lone request whose policy follows the costs (`adaptive`) decodes one step plainly.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from specllama.decoding.cost.model import LengthChoice, choose_lengths, fit_rows
from specllama.decoding.cost.online import StepCosts
from specllama.decoding.drafters import Proposal
from specllama.decoding.policy import NO_DRAFT, Ask
from specllama.decoding.slot import Slot

PROBE_EVERY = 48  # a plain step at most this often costs < 1 % at 2x, and keeps T(1) fresh
# While T(1) has never been timed here (no plain step yet, nothing learnt in an earlier run), the
# step after this many is plain. A drafter that drafts from the first step (an MTP head, sure of
# itself on a fresh prior) would otherwise run on T(1) guessed from its own batches and the prior's
# shape, which hides any cost: on llama.cpp #23752's Metal curve a head drafted 3 a step at 0.88x of
# plain until the text repeated (tests/unit/test_mtp_auto.py).
PROBE_FIRST = 2


class Planner:
    def __init__(self, costs: StepCosts, exact_rows: int | None = None):
        self.costs = costs
        self.exact_rows = exact_rows  # the most rows one decode may hold in exact mode

    def probing(self, running: Sequence[Slot]) -> bool:
        """Whether this step decodes plainly to measure T(1) again (one adaptive request alone,
        T(1) unobserved for PROBE_EVERY steps)."""
        if len(running) != 1 or not running[0].policy.adaptive:
            return False
        costs = self.costs
        if costs.last_t1_step < 0 and not costs.prior.learned and costs.steps >= PROBE_FIRST:
            return True
        return costs.steps > 0 and costs.steps - max(costs.last_t1_step, 0) >= PROBE_EVERY

    def asks(self, running: Sequence[Slot], target) -> list[Ask]:
        """Each request's ask for this step, its length settled for the batch."""
        probe, alone = self.probing(running), len(running) == 1
        asks = []
        for slot in running:
            room = 0 if probe else min(slot.verifier.max_k(target, slot.index),
                                       slot.config.max_tokens - slot.summary.tokens - 1)
            asks.append(slot.policy.ask(room, alone) if room > 0 else NO_DRAFT)
        return self._settle(asks)

    def _settle(self, asks: list[Ask]) -> list[Ask]:
        ks = [a.k if a.drafter is not None else 0 for a in asks]
        if len(asks) > 1 and any(a.estimates is not None for a in asks):
            choices = [LengthChoice(a.estimates if a.estimates is not None else [1.0] * k, a.draft_cost,
                                    a.cap if a.cap is not None else k) for a, k in zip(asks, ks)]
            fixed = [None if a.estimates is not None else k for a, k in zip(asks, ks)]
            ks = choose_lengths(choices, self.costs.step_ratio, max_rows=self.exact_rows, fixed=fixed)
        ks = fit_rows(ks, self.exact_rows)
        return [a if a.k == k else replace(a, k=k) for a, k in zip(asks, ks)]

    def cut(self, running: Sequence[Slot], proposals: dict[int, Proposal]) -> dict[int, Proposal]:
        """The one cut after drafting: each policy's own, then, in a batch, the drafts whose
        policies allow it jointly by the confidence each token came with. Other drafts (a fixed K,
        the draft model under `--drafter model`) keep their length. Returns the proposals as cut."""
        proposals = dict(proposals)
        trimmable = []
        for slot in running:
            proposals[slot.index], trim = slot.policy.cut(proposals[slot.index])
            trimmable.append(trim)
        if len(running) < 2 or not any(trimmable):
            return proposals
        choices, fixed = [], []
        for slot, trim in zip(running, trimmable):
            proposal = proposals[slot.index]
            n = len(proposal.tokens)
            known = list(proposal.confidence or [])[:n]
            # A fixed draft's tokens count with what is known of them (an unknown one: not at all).
            choices.append(LengthChoice(known + [0.0] * (n - len(known)), 0.0, n))
            fixed.append(None if trim else n)
        for slot, k in zip(running, choose_lengths(choices, self.costs.step_ratio, max_rows=self.exact_rows, fixed=fixed)):
            proposals[slot.index] = proposals[slot.index].keep(k)
        return proposals
