"""A decoding source whose every try lost waits ever longer before it is tried again.

The step costs forget a batch size timed only a few times long ago (cost/online.py STALE_STEPS)
and price it optimistically again, so a source that cannot pay here looks worth a try every
STALE_STEPS or so: on llama.cpp #23752's Metal curve an MTP head that always loses was sent 4-8
deep at each such moment, about 5 % of plain decoding's time over 256 tokens
(tests/unit/test_mtp_auto.py). The estimate is right to be tried again (a machine changes); what
was missing is the record of how those tries went.

A try is a step whose draft came from the source, verified alone (a batch's seconds are shared).
It lost for sure when even its every draft accepted would have realised less than plain decoding
in its time ((drafted + 1) tokens below seconds / T(1)): what it costs here, not the text, lost it.
Else the tries are judged together, the latest weighing most (each older one DECAY as much), once
there are MIN_TRIES of them: their emitted tokens below their seconds / T(1) is a loss, so one
unlucky try of a source that pays (its first draft token rejected: strix-0.8 in
tests/unit/test_mtp_auto.py) is not. A loss makes the source wait FIRST_WAIT steps, doubling with
each further loss in a row, up to MAX_WAIT; a win ends the streak.
Never forever: one try per MAX_WAIT steps (at most ~0.2 % of the time for a try that costs two
plain steps) is how it notices a change.
Tries made before T(1) was ever timed (a fresh machine's first steps) are judged once it is.
The record is the engine's (EngineRecord), shared by every request: what a try costs is the
machine's, and a new chat turn must not retry a head the last turn found losing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FIRST_WAIT = 32  # steps after a first loss
MAX_WAIT = 1024  # the longest wait: one try per this many steps
DECAY = 0.7  # the weight of the tries before the latest: a few tries of memory, tries being rare
MIN_TRIES = 4  # tries judged together before their realised rate may call a loss


@dataclass
class _Streak:
    losses: int = 0  # tries lost in a row
    until: int = -1  # the step before which the source is not tried
    pending: list[tuple[int, int, float]] = field(default_factory=list)  # (drafted, emitted, seconds) not judged yet
    tries: int = 0  # judged (as a group), since the last loss
    tokens: float = 0.0  # the judged tries' emitted tokens, decayed
    cost: float = 0.0  # their seconds in plain steps, decayed


@dataclass
class SourceBackoff:
    streaks: dict[str, _Streak] = field(default_factory=dict)

    def tried(self, source: str, drafted: int, emitted: int, seconds: float) -> None:
        """A step verified `source`'s draft of `drafted` tokens alone: `emitted` tokens in `seconds`."""
        if source and seconds > 0:
            self.streaks.setdefault(source, _Streak()).pending.append((drafted, emitted, seconds))

    def judge(self, t1: float | None, now: int) -> None:
        """Judge the tries made so far against T(1) (None: not timed yet, they wait); `now` the
        engine's step count."""
        if not t1:
            return
        for streak in self.streaks.values():
            for drafted, emitted, seconds in streak.pending:
                cost = seconds / t1
                streak.tokens = DECAY * streak.tokens + emitted
                streak.cost = DECAY * streak.cost + cost
                streak.tries += 1
                if drafted + 1 < cost or (streak.tries >= MIN_TRIES and streak.tokens < streak.cost):
                    streak.losses += 1
                    streak.until = now + min(MAX_WAIT, FIRST_WAIT << min(streak.losses - 1, 20))
                    streak.tries, streak.tokens, streak.cost = 0, 0.0, 0.0  # the next tries are judged afresh
                elif streak.tokens >= streak.cost:
                    streak.losses, streak.until = 0, -1
            streak.pending.clear()

    def waiting(self, now: int) -> frozenset[str]:
        """The sources not to try at step `now`."""
        return frozenset(s for s, streak in self.streaks.items() if now < streak.until)

    def losses(self, source: str) -> int:
        streak = self.streaks.get(source)
        return streak.losses if streak else 0
