"""`--drafter auto -k auto`: each step, the suffix drafter's draft, the draft model's, or none,
whichever promises the better rate on the live costs.

The free suffix draft is asked for first (it costs microseconds); then
    suffix rate = E(n) / (T(n+1)/T(1))           its draft at free_length (costs no decode)
    model rate  = E(K) / (K*c + T(K+1)/T(1))     the model's best K on this text (0: cannot pay)
and the model decodes only when its rate beats both the suffix draft's and plain decoding's (rate
1). Sources the realised check benched for this text are skipped. A chosen suffix draft comes
whole and is cut here where it pays, like ConfidentAuto's; the model's draft carries this text's
per-position acceptance as its confidence, so a batch can cut both kinds jointly."""

from __future__ import annotations

from dataclasses import replace
from typing import AbstractSet, Sequence

from specllama.decoding.acceptance import PositionAcceptance, TextFit
from specllama.decoding.cost.model import Ratio
from specllama.decoding.drafters import Drafter, Proposal
from specllama.decoding.outcome import StepOutcome
from specllama.decoding.policy.base import Ask, PolicyBase, PolicyKit
from specllama.decoding.policy.free_drafts import CopyRun, cut_free, free_rate, fully_known, long_enough
from specllama.decoding.proposal import still_certain
from specllama.decoding.realised import RealisedSpeed
from specllama.decoding.request import K_AUTO_MAX, K_COPY_MAX


def choose_source(suffix: Proposal, model: PositionAcceptance | None, cap: int, avoid: AbstractSet[str],
                  ratio: Ratio) -> tuple[str, int]:
    """("suffix" | "model" | "none", the model's K) for one step: the source with the better
    expected rate, if it beats plain decoding; `model` is the draft model's acceptance on this
    text, None without one."""
    model = model if "model" not in avoid else None
    model_k = min(model.choose(), cap) if model is not None else 0
    model_rate = (model.rate(model_k) or 1.0) if model_k else 1.0
    offered = (suffix.confidence or [])[:len(suffix.tokens)] if "suffix" not in avoid else []
    suffix_rate = free_rate(offered, ratio)
    if suffix_rate > max(1.0, model_rate) or (offered and suffix.certain):  # a near-certain copy goes first
        return "suffix", 0
    if model_rate > 1.0:
        return "model", model_k
    return "none", 0


class SourceChoice(PolicyBase):
    name = "source-choice"
    adaptive = True

    def __init__(self, suffix: Drafter, model: Drafter | None, kit: PolicyKit):
        self.suffix, self.model, self.kit = suffix, model, kit
        self.drafters = (suffix,) if model is None else (suffix, model)
        # The model's acceptance on this text; None: the model is never chosen.
        self.acceptance = kit.record(model.name) if model is not None and model.name in kit.records else None
        self.fit = TextFit()
        self.realised = RealisedSpeed()
        self.copy_run = CopyRun()
        self._cap = 0

    def start(self, slot: int, prompt: Sequence[int]) -> None:
        self.suffix.prefill(slot, prompt)
        # The model digests the prompt now only when it may be used at once; else it catches up on
        # its first proposal (a long prompt costs the draft seconds).
        if self.acceptance is not None and self.acceptance.choose() > 0:
            self.model.prefill(slot, prompt)

    def ask(self, room: int, alone: bool) -> Ask:
        self._cap = min(room, K_AUTO_MAX)  # the model's longest draft
        return Ask(self.suffix, min(room, K_COPY_MAX))

    def review(self, proposal: Proposal) -> tuple[Proposal, Ask | None]:
        if proposal.source != self.suffix.name:  # the model's draft: this text's odds as its confidence
            if proposal.confidence is None and self.acceptance is not None:
                proposal = replace(proposal, confidence=self.acceptance.fast[:len(proposal.tokens)])
            return proposal, None
        if proposal.confidence is not None:
            proposal = replace(proposal, confidence=self.fit.apply(proposal.confidence))
            proposal = replace(proposal, certain=still_certain(proposal))
        proposal = long_enough(proposal)
        choice, k = choose_source(proposal, self.acceptance, self._cap, self.realised.avoid(), self.kit.costs.ratio)
        if choice == "model":
            return proposal, Ask(self.model, k)
        if choice == "none":
            proposal = proposal.keep(0)
        return proposal, None

    def cut(self, proposal: Proposal) -> tuple[Proposal, bool]:
        if proposal.tokens and proposal.source == self.suffix.name:
            proposal = cut_free(proposal, self.kit.costs.ratio, self.kit.verifier.batch_tokens, self.copy_run.reach)
        return proposal, fully_known(proposal)

    def observe(self, outcome: StepOutcome) -> None:
        by_model = self.model is not None and outcome.source == self.model.name
        if outcome.drafted and not by_model:
            self.fit.observe(outcome.sent.confidence or [], outcome.drafted, outcome.n_accepted, outcome.odds)
            self.copy_run.observe(outcome.sent, outcome.n_accepted)
        else:
            self.fit.idle()
        if self.acceptance is not None:
            # Positions a step did not reach drift back to the record: drafted 0 when it sat out.
            self.acceptance.observe(outcome.drafted if by_model else 0, outcome.n_accepted if by_model else 0,
                                    outcome.odds if by_model else ())
        self.realised.tick()
        if outcome.alone:
            self.realised.observe(outcome.source, outcome.emitted, outcome.seconds, outcome.t1)
