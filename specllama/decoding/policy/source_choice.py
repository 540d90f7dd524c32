"""`--drafter auto -k auto`: each step, the suffix drafter's draft, a decoding source's (the draft
model, the target's own MTP head), or none, whichever promises the better rate on the live costs.

The free suffix draft is asked for first (it costs microseconds); then
    suffix rate  = E(n) / (T(n+1)/T(1))           its draft at free_length (costs no decode)
    source rate  = E(K) / (K*c + T(K+1)/T(1))     a decoding source's best K on this text (0: cannot pay)
where each decoding source has its own acceptance record and its own c (cost/online.py times the
draft model's and the MTP head's decodes apart). A near-certain copy goes to the suffix drafter
first; elsewhere the decoding source with the best rate decodes, only when that beats the suffix
draft's and plain decoding's (rate 1). So an MTP head whose verify batches cost more than its
accepted tokens save (Metal, llama.cpp #23752) is never chosen, and one that pays is, at the depth
its record and the costs say (tests/unit/test_mtp_auto.py). Sources the realised check benched for this
text are skipped, and so is a source whose every try lately lost, for ever longer (source_backoff.py:
the costs price a batch size they forgot optimistically again, which would retry it every time).
A chosen suffix draft comes whole and is cut here where it pays, like
ConfidentAuto's; a decoding source's draft carries this text's per-position acceptance as its
confidence, so a batch can cut every kind jointly."""

from __future__ import annotations

from dataclasses import replace
from typing import AbstractSet, Callable, Mapping, Sequence

from specllama.decoding.acceptance import PositionAcceptance
from specllama.decoding.cost.model import Ratio
from specllama.decoding.drafters import Drafter, Proposal
from specllama.decoding.outcome import StepOutcome
from specllama.decoding.policy.base import NO_DRAFT, Ask, PolicyBase, PolicyKit
from specllama.decoding.policy.catch_up_price import CatchUpPrice, rate_with_catch_up
from specllama.decoding.policy.draft_ramp import DraftRamp
from specllama.decoding.policy.free_drafts import cut_free, free_rate, fully_known, long_enough
from specllama.decoding.realised import RealisedSpeed
from specllama.decoding.request import K_AUTO_MAX, K_COPY_MAX


def choose_source(suffix: Proposal, decoding: Mapping[str, PositionAcceptance] | PositionAcceptance | None, cap: int,
                  avoid: AbstractSet[str], ratio: Ratio, behind: Callable[[str], float] | None = None) -> tuple[str, int]:
    """("suffix" | a decoding source's name | "none", that source's K) for one step: the source
    with the best expected rate, if it beats plain decoding. `decoding` holds each decoding
    source's acceptance on this text by name (a lone record is the draft model's; None: none);
    `behind(name)`, in plain steps, what a source must first decode of the text it has not seen (it
    sat out): a step that catches up pays its share (catch_up_price.py)."""
    if decoding is None or isinstance(decoding, PositionAcceptance):
        decoding = {} if decoding is None else {"model": decoding}
    best, best_k, best_rate = "none", 0, 1.0
    for name, record in decoding.items():
        if name in avoid:
            continue
        k = min(record.choose(), cap)
        rate = (rate_with_catch_up(record, k, behind(name) if behind else 0.0) or 1.0) if k else 1.0
        if rate > best_rate:
            best, best_k, best_rate = name, k, rate
    offered = (suffix.confidence or [])[:len(suffix.tokens)] if "suffix" not in avoid else []
    suffix_rate = free_rate(offered, ratio)
    if suffix_rate > best_rate or (offered and suffix.certain):  # a near-certain copy goes first
        return "suffix", 0
    return best, best_k


class SourceChoice(PolicyBase):
    name = "source-choice"
    adaptive = True

    def __init__(self, suffix: Drafter, decoding: Drafter | Sequence[Drafter] | None, kit: PolicyKit):
        """`decoding`: the loaded drafters that cost a decode (the draft model, the MTP head), or
        one of them, or None."""
        if decoding is None:
            decoding = ()
        elif not isinstance(decoding, (list, tuple)):
            decoding = (decoding,)
        self.suffix, self.kit = suffix, kit
        self.decoding = {d.name: d for d in decoding}
        self.model = self.decoding.get("model")
        self.drafters = (suffix, *self.decoding.values())
        # Each decoding source's acceptance on this text; one without a record is never chosen.
        self.records = {name: kit.record(name) for name in self.decoding if name in kit.records}
        self.acceptance = self.records.get("model")
        self.realised = RealisedSpeed()
        self.ramp = DraftRamp()  # how far this text's suffix drafts may reach (draft_ramp.py)
        # The sources that follow every target decode (an MTP head): none in a suffix-only setup,
        # whose steps then skip _follow's checks (a GPU step is ~2 ms: its Python counts, issue 42).
        self._followers = {name: d.follow for name, d in self.decoding.items() if hasattr(d, "follow")}
        self._cap = 0
        self._slot = 0
        self.catch_up = CatchUpPrice(kit.costs)  # what a decoding source that sat out must catch up on

    def start(self, slot: int, prompt: Sequence[int]) -> None:
        self._slot = slot
        self.catch_up.start(slot, prompt)
        self.suffix.prefill(slot, prompt)
        # A decoding source digests the prompt now only when it may be used at once; else it
        # catches up on its first proposal (a long prompt costs the draft seconds).
        for name, record in self.records.items():
            if record.choose() > 0:
                self.decoding[name].prefill(slot, prompt)

    def ask(self, room: int, alone: bool) -> Ask:
        self._cap = min(room, K_AUTO_MAX)  # a decoding source's longest draft
        if self.suffix.name in self.realised.not_asked():  # asking it does not pay: not even asked
            if not self.records:  # no decoding source to turn to: a plain step
                return NO_DRAFT
            choice, k = choose_source(Proposal(()), self.records, self._cap, self._avoid(), self.kit.costs.step_ratio,
                                      self._behind)
            return self._ask(choice, k) if choice in self.decoding else NO_DRAFT
        return Ask(self.suffix, min(room, K_COPY_MAX))

    def _ask(self, name: str, k: int) -> Ask:
        """Ask a decoding source for k tokens, or fewer while it is on probation (realised.py): what
        the cut would drop is not decoded at all."""
        return Ask(self.decoding[name], self.realised.allowed(name, k))

    def _behind(self, name: str) -> float:
        return self.catch_up.steps(self.decoding[name])

    def _avoid(self) -> frozenset[str]:
        """Sources not to use now: benched by the realised check, or backing off (source_backoff.py)."""
        return self.realised.avoid() | self.kit.engine.backoff.waiting(self.kit.costs.steps)

    def review(self, proposal: Proposal) -> tuple[Proposal, Ask | None]:
        if proposal.source != self.suffix.name:  # a decoding source's draft: this text's odds as its confidence
            record = self.records.get(proposal.source)
            if proposal.confidence is None and record is not None:
                proposal = replace(proposal, confidence=tuple(record.fast[:len(proposal.tokens)]))
            return proposal, None
        proposal = long_enough(proposal)
        if not proposal.tokens and not self.records:  # nothing offered, no other source: a plain step
            return proposal, None
        avoid = self._avoid()
        choice, k = choose_source(proposal, self.records, self._cap, avoid, self.kit.costs.step_ratio, self._behind)
        if choice in self.decoding:
            return proposal, self._ask(choice, k)
        if choice == "none":
            proposal = proposal.keep(0)
        return proposal, None

    def cut(self, proposal: Proposal) -> tuple[Proposal, bool]:
        proposal = proposal.keep(self.realised.allowed(proposal.source, len(proposal.tokens)))
        if proposal.tokens and proposal.source == self.suffix.name:
            proposal = self.ramp.cap(cut_free(proposal, self.kit.costs.step_ratio, self.kit.verifier.batch_tokens))
        return proposal, fully_known(proposal)

    def observe(self, outcome: StepOutcome) -> None:
        self.catch_up.grew(outcome.tokens)
        decoded_by = outcome.source if outcome.source in self.decoding else None
        for name, record in self.records.items():
            # Positions a step did not reach drift back to the record: drafted 0 when it sat out.
            mine = name == decoded_by
            record.observe(outcome.drafted if mine else 0, outcome.n_accepted if mine else 0,
                           outcome.odds if mine else ())
        self.ramp.observe(outcome, self.suffix.name)
        self.realised.tick(outcome.source)
        if outcome.alone:
            self.realised.observe_step(outcome)
            if decoded_by is not None:
                self.kit.engine.backoff.tried(decoded_by, outcome.drafted, outcome.emitted, outcome.seconds)
        costs = self.kit.costs
        # Judged against T(1) only once a plain step timed it (or earlier runs did): before, it is
        # guessed from the drafting steps' own batches, which hides what they cost.
        if costs.last_t1_step >= 0 or costs.prior.learned:
            self.kit.engine.backoff.judge(costs.t1(), costs.steps)
        self._follow()

    def _follow(self) -> None:
        """A source that must follow every target decode (an MTP head) does so only while it may be
        chosen: not benched or waiting, and some draft length pays on its record and the costs.
        Else each step would pay for feeding a head that drafts nothing (it catches up when chosen)."""
        if not self._followers:
            return
        avoid = self._avoid()
        for name, follow in self._followers.items():
            record = self.records.get(name)
            follow(self._slot, name not in avoid and record is not None and record.choose() > 0)
