"""A decoding source whose every try lost waits ever longer before it is tried again.

The step costs forget a batch size timed only a few times long ago (cost/online.py STALE_STEPS)
and price it optimistically again, so a source that cannot pay here looks worth a try every
STALE_STEPS or so: on llama.cpp #23752's Metal curve an MTP head that always loses was sent 4-8
deep at each such moment, about 5 % of plain decoding's time over 256 tokens
(tests/unit/test_mtp_auto.py). The estimate is right to be tried again (a machine changes); what
was missing is the record of how those tries went.

A try is a step whose draft came from the source, verified alone (a batch's seconds are shared);
it lost when the source's tries so far, the latest weighing most (each older one DECAY as much),
realised less than plain decoding would have in their time: emitted tokens below seconds / T(1).
So one unlucky try of a source that pays (its first draft token rejected) is not a loss, and a
lucky one of a source that does not pay is not a win. A loss makes the source wait FIRST_WAIT
steps, doubling with each further loss in a row, up to MAX_WAIT; a try that wins ends the streak.
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
DECAY = 0.5  # the weight of the tries before the latest: a few tries of memory, tries being rare


@dataclass
class _Streak:
    losses: int = 0  # tries lost in a row
    until: int = -1  # the step before which the source is not tried
    pending: list[tuple[int, float]] = field(default_factory=list)  # (emitted, seconds): tries not judged yet
    tokens: float = 0.0  # the judged tries' emitted tokens, decayed
    cost: float = 0.0  # their seconds in plain steps, decayed


@dataclass
class SourceBackoff:
    streaks: dict[str, _Streak] = field(default_factory=dict)

    def tried(self, source: str, emitted: int, seconds: float) -> None:
        """A step verified `source`'s draft alone: `emitted` tokens in `seconds`."""
        if source and seconds > 0:
            self.streaks.setdefault(source, _Streak()).pending.append((emitted, seconds))

    def judge(self, t1: float | None, now: int) -> None:
        """Judge the tries made so far against T(1) (None: not timed yet, they wait); `now` the
        engine's step count."""
        if not t1:
            return
        for streak in self.streaks.values():
            for emitted, seconds in streak.pending:
                streak.tokens = DECAY * streak.tokens + emitted
                streak.cost = DECAY * streak.cost + seconds / t1
                if streak.tokens < streak.cost:
                    streak.losses += 1
                    streak.until = now + min(MAX_WAIT, FIRST_WAIT << min(streak.losses - 1, 20))
                else:
                    streak.losses, streak.until = 0, -1
            streak.pending.clear()

    def waiting(self, now: int) -> frozenset[str]:
        """The sources not to try at step `now`."""
        return frozenset(s for s, streak in self.streaks.items() if now < streak.until)

    def losses(self, source: str) -> int:
        streak = self.streaks.get(source)
        return streak.losses if streak else 0
