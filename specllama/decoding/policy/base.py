"""The shape of a draft policy: per request, how many drafts from which source each step.

One policy object is made for each request when it is checked (policy/registry.py chooses it from
the request's drafter and K, or by name) and lives as long as the request. The engine drives it
through a step:

    ask(room, alone) -> Ask         before drafting: a drafter and at most how many tokens (room is
                                    what the context, max_tokens and the verifier leave; alone: the
                                    only request in this step)
    review(proposal) -> (Proposal, Ask | None)
                                    after its drafter proposed: the proposal it keeps (a proposal
                                    is immutable: a rescaled or emptied one is a new one, keep(n)),
                                    and None, or another drafter to ask (`--drafter auto` asks the
                                    free suffix drafter first, then the draft model only if the
                                    suffix draft is not worth more)
    cut(proposal) -> (Proposal, bool)
                                    its own cut of what is sent; True: the batch's joint cut may
                                    shorten it further (a draft with a confidence per token)
    observe(outcome)                what the step did (outcome.py): every step, drafted or not

`start(slot, prompt)` digests the prompt in the drafters it will use (or leaves that to their first
proposal); `drafters` names them, so the engine rolls their caches back with the target's and tells
them when the request ends. A policy decides only for its own request: what several requests share
(the batch's rows, exact mode's limit, T(1)'s freshness) is the planner's (planner.py).

What a policy is built from is a PolicyKit: the loaded drafters, the live step costs, the long-run
acceptance records of drafters without a confidence of their own, and the request's verifier.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Protocol, Sequence

from specllama.decoding.acceptance import PositionAcceptance
from specllama.decoding.cost.online import StepCosts
from specllama.decoding.drafters import Drafter, Proposal
from specllama.decoding.outcome import StepOutcome
from specllama.decoding.policy.source_backoff import SourceBackoff
from specllama.decoding.verifiers import Verifier
from specllama.errors import SpecllamaError


@dataclass(frozen=True)
class Ask:
    """A draft of at most `k` tokens from `drafter` (k = 0 or no drafter: none this step).

    For the planner's joint plan of a batch, a policy that sizes its drafts on per-position
    acceptance (the draft model's) also gives its `estimates`, the `draft_cost` of a token in plain
    steps and its `cap` (the most it would take); `estimates` None means the length is the
    policy's to keep (a fixed K, or a free draft it cuts itself after drafting)."""

    drafter: Drafter | None = None
    k: int = 0
    estimates: Sequence[float] | None = None
    draft_cost: float = 0.0
    cap: int | None = None

    @property
    def drafts(self) -> bool:
        return self.drafter is not None and self.k > 0


NO_DRAFT = Ask()


@dataclass
class EngineRecord:
    """What the engine as a whole has seen, for policies that act on it: whether any step has
    verified a draft yet (model_auto.py tries a draft model until one has); how the decoding
    sources' tries went (source_backoff.py: one that kept losing waits longer before the next)."""

    drafted: bool = False
    backoff: SourceBackoff = field(default_factory=SourceBackoff)


@dataclass
class PolicyKit:
    drafters: Mapping[str, Drafter]  # loaded drafters by name ("suffix", "model")
    costs: StepCosts  # what steps cost here, learnt live
    records: Mapping[str, PositionAcceptance]  # long-run acceptance of drafters without own confidence
    verifier: Verifier  # the request's: the rows a draft of k costs
    engine: EngineRecord = field(default_factory=EngineRecord)

    def drafter(self, name: str) -> Drafter:
        drafter = self.drafters.get(name)
        if drafter is None:
            hint = {"model": " (no draft model is loaded: pass --draft or a pair)",
                    "mtp": " (load with --drafter mtp a model whose GGUF has MTP layers)"}.get(name, "")
            raise SpecllamaError(f"the {name} drafter is not available{hint}")
        return drafter

    def record(self, name: str) -> PositionAcceptance:
        """This drafter's acceptance, for one text: its own fast estimates over the shared record,
        priced on the request's verifier rows."""
        shared = self.records.get(name)
        if shared is None:
            raise SpecllamaError(f"-k auto has no acceptance record for the {name} drafter")
        view = shared.for_text()
        view.verify_tokens = self.verifier.batch_tokens
        return view


class DraftPolicy(Protocol):
    name: str
    drafters: tuple[Drafter, ...]  # whose caches follow the request's slot
    # Its lengths follow the live costs: the planner may make its lone step a plain one now and then
    # so that T(1), every estimate's yardstick, stays current (planner.PROBE_EVERY).
    adaptive: bool

    def start(self, slot: int, prompt: Sequence[int]) -> None: ...

    def ask(self, room: int, alone: bool) -> Ask: ...

    def review(self, proposal: Proposal) -> tuple[Proposal, Ask | None]: ...

    def cut(self, proposal: Proposal) -> tuple[Proposal, bool]: ...

    def observe(self, outcome: StepOutcome) -> None: ...


class PolicyBase:
    """Defaults for the parts of the protocol a policy does not need: no prefill beyond what its
    drafters do, keep every proposal, cut nothing, learn nothing."""

    name = "base"
    drafters: tuple[Drafter, ...] = ()
    adaptive = False

    def start(self, slot: int, prompt: Sequence[int]) -> None:
        for drafter in self.drafters:
            drafter.prefill(slot, prompt)

    def review(self, proposal: Proposal) -> tuple[Proposal, Ask | None]:
        return proposal, None

    def cut(self, proposal: Proposal) -> tuple[Proposal, bool]:
        return proposal, False

    def observe(self, outcome: StepOutcome) -> None:
        pass
