"""What a drafter proposes for one sequence: its own module because both the drafters (who make
it) and the step's outcome (which records what was sent) need it, and neither needs the other."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Sequence

import numpy as np

from specllama.decoding.draft_rows import DraftRows

# The odds from which a drafter's (calibrated) token counts as near-certain: see Proposal.certain.
NEAR_CERTAIN_ODDS = 0.85
PER_TOKEN = {"per_token": True}  # a field's metadata: one entry per draft token, cut with the tokens


@dataclass(frozen=True)
class Proposal:
    """A draft, immutable: whoever cuts it (the engine to the asked K, a policy where it pays, the
    planner for the batch, a grammar at a forbidden token) gets a new one from `keep(n)`, which cuts
    every per-token array together, so they never go out of step; a policy that rescales it makes a
    new one too (dataclasses.replace). Sequences are stored as tuples and q read-only."""

    tokens: tuple[int, ...] = field(metadata=PER_TOKEN)
    # (len(tokens), vocab) when the drafter sampled: its rows' weights (DraftRows), or an array
    q: DraftRows | np.ndarray | None = field(default=None, metadata=PER_TOKEN)
    # per token: estimated P(accepted | the ones before accepted)
    confidence: tuple[float, ...] | None = field(default=None, metadata=PER_TOKEN)
    source: str = ""  # the drafter that made it (filled in by the engine when empty)
    # Leading tokens the drafter holds near-certain (a long exact match whose class has held so far;
    # a grammar's forced tokens): a policy sends them whatever its cost estimate says, so a wrong
    # or noisy estimate cannot stop the drafts that would correct it (the realised-speed check
    # still benches a source that loses).
    certain: int = 0
    # Per token, when the draft mixes sources (a drafter's tokens, then those a grammar forces:
    # grammar.py); None: every token is `source`'s.
    sources: tuple[str, ...] | None = field(default=None, kw_only=True, metadata=PER_TOKEN)

    def __post_init__(self) -> None:
        for name in _per_token(type(self)):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, np.ndarray):
                if value.flags.writeable:
                    value = value.view()
                    value.flags.writeable = False
            elif not isinstance(value, (tuple, DraftRows)):  # DraftRows: immutable, cut with [:n]
                value = tuple(value)
            object.__setattr__(self, name, value)

    def keep(self, n: int) -> "Proposal":
        """The first n tokens (all of them when n is more), with every per-token array cut alike;
        the near-certain lead no longer than what is kept."""
        n = max(n, 0)
        if n >= len(self.tokens):
            return self
        cut = {name: getattr(self, name)[:n] for name in _per_token(type(self)) if getattr(self, name) is not None}
        return replace(self, **cut, certain=min(self.certain, n))

    def through_end(self, ends: frozenset[int]) -> "Proposal":
        """The draft up to its first token in `ends` (end of generation) and no further: that token,
        accepted, ends the answer, so nothing after it is ever emitted, while each row verifying it
        costs as any other. Copies run past the end where the text they copy goes on: an agent's
        re-sent file ends in ``` then the turn's end, and the earlier answer it copies goes on into
        the next user turn; a summary's last sentence copied from the prompt goes on into the
        prompt's end and the answer's own start (bench/prompts_unseen3.jsonl's summary-release:
        14 rows, 7.5 plain steps' time, for its last two tokens)."""
        if ends.isdisjoint(self.tokens):
            return self
        return self.keep(next(i for i, t in enumerate(self.tokens) if t in ends) + 1)

    def source_of(self, i: int) -> str:
        return self.sources[i] if self.sources is not None else self.source


_PER_TOKEN_FIELDS: dict[type, tuple[str, ...]] = {}


def _per_token(cls: type) -> tuple[str, ...]:
    """A Proposal class's per-token field names, found once: dataclasses.fields() on every proposal
    made and cut was ~10 us of a step (a GPU step is ~2 ms)."""
    names = _PER_TOKEN_FIELDS.get(cls)
    if names is None:
        names = _PER_TOKEN_FIELDS[cls] = tuple(f.name for f in fields(cls) if f.metadata.get("per_token"))
    return names


def certain_lead(confidence: Sequence[float], limit: int) -> int:
    """How many leading tokens, at most `limit`, are at NEAR_CERTAIN_ODDS or more."""
    return odds_lead(confidence, NEAR_CERTAIN_ODDS, limit)


def odds_lead(confidence: Sequence[float], odds: float, limit: int) -> int:
    """How many leading tokens, at most `limit`, are at `odds` or more."""
    n = 0
    while n < min(limit, len(confidence)) and confidence[n] >= odds:
        n += 1
    return n
