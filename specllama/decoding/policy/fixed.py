"""A fixed K, as the user asked: every step drafts up to K tokens (fewer where the context or
max_tokens leave less room), whatever the costs say.

`--drafter auto` with a fixed K keeps the user's rule of thumb: the suffix drafter's draft when
its lookup matched, else the draft model's (when one is loaded)."""

from __future__ import annotations

from specllama.decoding.drafters import Drafter, Proposal
from specllama.decoding.policy.base import Ask, PolicyBase


class FixedLength(PolicyBase):
    name = "fixed"

    def __init__(self, drafter: Drafter, k: int):
        self.drafter, self.k = drafter, k
        self.drafters = (drafter,)

    def ask(self, room: int, alone: bool) -> Ask:
        return Ask(self.drafter, min(room, self.k))


class FixedSuffixThenModel(PolicyBase):
    name = "fixed-auto"

    def __init__(self, suffix: Drafter, model: Drafter | None, k: int):
        self.suffix, self.model, self.k = suffix, model, k
        self.drafters = (suffix,) if model is None else (suffix, model)
        self._asked = 0

    def ask(self, room: int, alone: bool) -> Ask:
        self._asked = min(room, self.k)
        return Ask(self.suffix, self._asked)

    def review(self, proposal: Proposal) -> tuple[Proposal, Ask | None]:
        if proposal.tokens or self.model is None or proposal.source == self.model.name:
            return proposal, None
        return proposal, Ask(self.model, self._asked)
