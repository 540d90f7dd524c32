"""The one decision of a step: how many drafts each sequence gets.

Before drafting, `caps` bounds each sequence (its context, its max tokens, its K or the -k auto
ceiling, exact mode, a plain-decoding probe, sources benched by the realised check); `lengths`
chooses the -k auto lengths of drafters without their own confidence (the draft model), jointly
for every sequence on the live costs (cost/model.py); after drafting, `cut` trims the drafts of
self-sized drafters (suffix, auto) jointly when several sequences share the decode (a draft row
delays every other sequence's token) and fits exact mode's row limit. The rows a draft costs are
always the verifier's own (`batch_tokens`).

Checked against what it achieves: every PROBE_EVERY steps without a plain step, a lone -k auto
sequence decodes one step plainly, so T(1), the yardstick of every decision, stays current on a
drifting machine; and each sequence's realised speed per source (realised.py) benches a source
that, on this text, does worse than plain decoding, whatever the estimates say.
"""

from __future__ import annotations

from typing import Sequence

from specllama.decoding.cost.model import LengthChoice, choose_lengths, fit_rows
from specllama.decoding.cost.online import StepCosts
from specllama.decoding.drafters import Proposal
from specllama.decoding.request import AUTO, K_AUTO_MAX
from specllama.decoding.sequence import SequenceState

PROBE_EVERY = 48  # a plain step at most this often costs < 1 % at 2x, and keeps T(1) fresh


class Planner:
    def __init__(self, costs: StepCosts, exact_rows: int | None = None):
        self.costs = costs
        self.exact_rows = exact_rows  # the most rows one decode may hold in exact mode

    def probing(self, running: Sequence[SequenceState]) -> bool:
        """Whether this step decodes plainly to measure T(1) again (one -k auto sequence alone,
        T(1) unobserved for PROBE_EVERY steps)."""
        if len(running) != 1 or running[0].config.k != AUTO:
            return False
        costs = self.costs
        return costs.steps > 0 and costs.steps - max(costs.last_t1_step, 0) >= PROBE_EVERY

    def caps(self, running: Sequence[SequenceState], target) -> list[int]:
        probe = self.probing(running)
        caps = []
        for seq in running:
            cap = 0
            benched = seq.config.k == AUTO and seq.drafter.name in seq.realised.avoid()
            if seq.may_draft and not probe and not benched:
                room = min(seq.verifier.max_k(target, seq.slot), seq.config.max_tokens - seq.summary.tokens - 1)
                most = seq.acceptance.k_max if seq.acceptance else K_AUTO_MAX if seq.config.k == AUTO else int(seq.config.k)
                cap = max(0, min(room, most))
            caps.append(cap)
        return caps

    def lengths(self, running: Sequence[SequenceState], caps: list[int]) -> list[int]:
        """Each sequence's draft length within its cap: a fixed K, a self-sized drafter's cap (it
        cuts its own draft), or, for the draft model under -k auto, the best on its acceptance."""
        if not any(seq.acceptance for seq in running):
            return fit_rows(caps, self.exact_rows)
        if len(running) == 1:
            seq = running[0]
            return [min(seq.acceptance.choose(), caps[0]) if caps[0] else 0]
        choices = [LengthChoice(seq.acceptance.fast if seq.acceptance else [1.0] * cap,
                                seq.acceptance.c if seq.acceptance else 0.0, cap)
                   for seq, cap in zip(running, caps)]
        ks = choose_lengths(choices, self.costs.ratio, max_rows=self.exact_rows)
        # A fixed-K request keeps its K: the plan only sizes the -k auto ones around it.
        return fit_rows([cap if seq.acceptance is None else k for seq, cap, k in zip(running, caps, ks)],
                        self.exact_rows)

    def cut(self, running: Sequence[SequenceState], proposals: dict[int, Proposal]) -> None:
        """Self-sized drafts were sized as if their sequence were decoded alone; in a batch they
        are cut jointly on the batch's costs, by the confidence each token came with (measured on
        bench/prompts_similar.jsonl at --parallel auto before this: drafting made the job 0.89-1.05x
        of plain decoding's). Other drafts keep their planned length."""
        if len(running) < 2:
            return
        choices, fixed = [], []
        for seq in running:
            proposal = proposals[seq.slot]
            n = len(proposal.tokens)
            known = list(proposal.confidence or (seq.acceptance.fast if seq.acceptance else []))[:n]
            trimmable = seq.config.k == AUTO and getattr(seq.drafter, "sizes_itself", False) and len(known) == n > 0
            # A fixed draft's tokens count with what is known of them (an unknown one: not at all).
            choices.append(LengthChoice(known + [0.0] * (n - len(known)), 0.0, n))
            fixed.append(None if trimmable else n)
        if all(f is not None for f in fixed):
            return
        for seq, k in zip(running, choose_lengths(choices, self.costs.ratio, max_rows=self.exact_rows, fixed=fixed)):
            proposals[seq.slot].tokens = proposals[seq.slot].tokens[:k]

    def judge_step(self, running: Sequence[SequenceState], sources: Sequence[str], emitted: Sequence[int],
                   seconds: float) -> None:
        """After a step: each lone -k auto sequence's realised speed with the source it used
        (a batch's step time is shared, so the check reads single-sequence steps only)."""
        for seq in running:
            seq.realised.tick()
        if len(running) == 1 and running[0].config.k == AUTO:
            running[0].realised.observe(sources[0], emitted[0], seconds, self.costs.t1())
