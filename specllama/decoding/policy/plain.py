"""Plain decoding: no draft, ever (the drafter none, or K = 0)."""

from __future__ import annotations

from specllama.decoding.policy.base import NO_DRAFT, Ask, PolicyBase


class Plain(PolicyBase):
    name = "none"

    def ask(self, room: int, alone: bool) -> Ask:
        return NO_DRAFT
