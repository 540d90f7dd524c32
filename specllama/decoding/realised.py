"""The planner's check: does a draft source realise, on this text, more than plain decoding would?

Predictions rest on estimates (acceptance, step costs) that can be wrong for a while; this record
looks only at what happened. Per source, over the recent steps that used it (each older step
weighing DECAY as much), it compares

    tokens gained / (step seconds / T(1) at the time)

with 1, plain decoding's rate: one token per plain step. A source whose record falls below
1 - MARGIN after MIN_STEPS steps is benched for `pause` steps (doubling each time it is benched
again, up to MAX_PAUSE), so a wrong estimate cannot keep a losing choice for more than a few steps,
and a source that was only unlucky is tried again later.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DECAY = 0.8  # ~5 steps of memory: a text's character shows within a few steps
MIN_STEPS = 4  # evidence before a verdict
MARGIN = 0.03  # within 3 % of plain decoding is measurement noise on a shared machine
FIRST_PAUSE, MAX_PAUSE = 16, 256


@dataclass
class _Record:
    tokens: float = 0.0
    cost: float = 0.0  # in plain steps
    steps: int = 0
    pause: int = FIRST_PAUSE

    @property
    def gain(self) -> float:
        return self.tokens / self.cost if self.cost > 0 else 1.0


@dataclass
class RealisedSpeed:
    records: dict[str, _Record] = field(default_factory=dict)
    benched: dict[str, int] = field(default_factory=dict)  # source -> steps left on the bench

    def observe(self, source: str, tokens: int, seconds: float, t1: float | None) -> None:
        """A step that verified `source`'s draft emitted `tokens` in `seconds` (drafting
        included); t1 is plain decoding's step time now."""
        if not source or not t1 or seconds <= 0:
            return
        r = self.records.setdefault(source, _Record())
        r.tokens = r.tokens * DECAY + tokens
        r.cost = r.cost * DECAY + seconds / t1
        r.steps += 1
        if r.steps >= MIN_STEPS and r.gain < 1.0 - MARGIN:
            self.benched[source] = r.pause
            self.records[source] = _Record(pause=min(MAX_PAUSE, r.pause * 2))  # evidence starts afresh

    def tick(self) -> None:
        """One step went by."""
        for source in list(self.benched):
            self.benched[source] -= 1
            if self.benched[source] <= 0:
                del self.benched[source]

    def avoid(self) -> frozenset[str]:
        """Sources benched now."""
        return frozenset(self.benched)
