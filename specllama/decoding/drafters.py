"""Drafters: where proposed tokens come from. A drafter proposes; the request's draft policy
(policy/) decides how many it is asked for and what is sent.

The engine runs several sequences at once (one slot each), so a drafter is asked for all of
them together: `propose(requests)` gets one DraftRequest per sequence that wants drafts this step
and returns one Proposal each, in order. That lets the model drafter decode one draft position of
every sequence in ONE batch (lockstep) instead of one decode per sequence.

A request holds the committed sequence (prompt + accepted output, ending with the token the target
has not decoded yet) and the most drafts to propose; `q` holds the drafter's probabilities for each
proposed token when it sampled them; None means the proposals were deterministic (greedy or looked
up), which the rejection sampler treats as one-hot. `confidence`, when a drafter gives it, is its
estimate per token that the target accepts it (chained by the policy when it cuts the draft).
After verification the engine calls `rollback(seq, n)`: keep state for the first n committed
tokens only (the model drafter's cache drops its rejected drafts there), and, for the drafter
whose proposal was verified, `observe(seq, outcome)` (outcome.StepOutcome: what was sent, and the
odds the target accepted each judged token with) so it can calibrate itself. When a sequence's
generation ends, `finish(seq, committed)`: a model-free drafter may keep its text to draft later
texts from.

Drafters declare what they are instead of being probed: `free` (proposing costs no model decode),
`confident` (each proposal carries a confidence per token), `contexts` (the llama.cpp contexts it
decodes in, whose time --stats reports) and `timing()` (draft positions decoded and their seconds,
for the cost model; a free drafter has none).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

import numpy as np

from specllama.decoding.catch_up import SPLIT, CatchUpChoice
from specllama.decoding.draft_rows import DraftRow, DraftRows
from specllama.decoding.proposal import Proposal
from specllama.decoding.request import GenerationConfig
from specllama.decoding.target_rows import row_weights
from specllama.llama.context import DecodeContext, DecodePart

if TYPE_CHECKING:
    from specllama.decoding.outcome import StepOutcome


@dataclass
class DraftRequest:
    seq: int  # the engine's slot for this sequence (the KV-cache sequence id)
    committed: Sequence[int]
    k: int  # the most drafts to propose this step
    config: GenerationConfig
    rng: np.random.Generator


class Drafter(Protocol):
    name: str
    free: bool  # proposing costs no model decode
    # Proposals carry a confidence per token: under -k auto its policy asks for all it has (up to
    # K_AUTO_MAX) and cuts what is sent on that confidence (policy/confident_auto.py).
    confident: bool
    contexts: tuple  # the llama.cpp contexts it decodes in (none for a free drafter)

    def timing(self) -> tuple[int, float]:
        """Draft positions decoded so far and their seconds (a catch-up is not a position)."""

    def propose(self, requests: Sequence[DraftRequest]) -> list[Proposal]: ...

    def prefill(self, seq: int, prompt: Sequence[int]) -> None:
        """Digest the prompt before generation starts, so its cost counts as prompt time."""

    def rollback(self, seq: int, n_tokens: int) -> None:
        """Keep what follows from the first n_tokens committed tokens; drop the rest."""

    def observe(self, seq: int, outcome: StepOutcome) -> None:
        """How the target judged the proposal that was sent (after the policy's cuts)."""

    def finish(self, seq: int, committed: Sequence[int]) -> None:
        """The sequence's generation ended (committed = prompt + output)."""

    def reset(self) -> None: ...


class DrafterBase:
    """Defaults for the parts of the protocol a drafter does not need: a free drafter without
    confidence, nothing to prefill, roll back, learn or keep."""

    name = "base"
    free = True
    confident = False
    contexts: tuple = ()

    def timing(self) -> tuple[int, float]:
        return 0, 0.0

    def catch_up_seconds(self, seq: int, text: Sequence[int]) -> float:
        """What decoding the part of `text` it has not seen would cost before it can draft (beyond a
        usual step's one or two tokens, which are a draft position's cost)."""
        return 0.0

    def prefill(self, seq: int, prompt: Sequence[int]) -> None:
        pass

    def rollback(self, seq: int, n_tokens: int) -> None:
        pass

    def observe(self, seq: int, outcome: StepOutcome) -> None:
        pass

    def finish(self, seq: int, committed: Sequence[int]) -> None:
        pass

    def reset(self) -> None:
        pass


class NoDrafter(DrafterBase):
    """Plain decoding: the engine's loop with K = 0."""

    name = "none"

    def propose(self, requests: Sequence[DraftRequest]) -> list[Proposal]:
        return [Proposal([]) for _ in requests]


LOCKSTEP_BACKLOG = 32  # catch-ups up to this long ride in the shared decode (K_MAX + 1 fits)
BACKLOG_TIMED_TOKENS = 16  # backlog tokens timed before their own seconds a token price a catch-up...
BACKLOG_ROW_GUESS = 0.25  # ...until then a token of it costs this share of a one-token decode (a batch row)
CATCH_UP_TIMED = 2  # a first decode of at most this many tokens a sequence (the usual last accepted
# draft and the target's token) counts as a draft position's cost


class ModelDrafter(DrafterBase):
    """A small model in its own context, one cache sequence per engine slot. Its caches are kept
    between steps and only the tokens it has not seen are decoded, so a rejected tail costs a
    rollback, not a re-decode. Several sequences draft in lockstep: draft position i of every
    sequence is one decode."""

    name = "model"
    free = False

    def __init__(self, ctx: DecodeContext, clock: Callable[[], float] = time.perf_counter,
                 catch_up: CatchUpChoice | None = None):
        self.ctx = ctx
        self.clock = clock
        # How the tokens it has not seen are decoded before it drafts: with the first draft position
        # (merged), or one a decode (split), a GPU backend's graphs kept on one shape (catch_up.py).
        self.catch_up = catch_up or CatchUpChoice()
        # What one draft position costs, for the planner (cost/online.py): decodes of one token per
        # sequence, and their seconds (a split catch-up's decode is part of its step's positions'
        # cost). A catch-up of several tokens (the model sat out steps under auto) is real work but
        # not what another draft token costs: it is not counted here.
        self.timed_decodes = 0
        self.timed_seconds = 0.0
        # What its long catch-ups and prompts cost (tokens, seconds): what a source that sat out pays
        # to draft again (catch_up_seconds), priced by the policy choosing a source (source_choice.py).
        self.backlog_tokens = 0
        self.backlog_seconds = 0.0
        self.contexts = (ctx,)

    def timing(self) -> tuple[int, float]:
        return self.timed_decodes, self.timed_seconds

    def catch_up_seconds(self, seq: int, text: Sequence[int]) -> float:
        backlog = len(text) - self.ctx.common_prefix(text, seq)  # a new prompt: what it held of the last one goes
        if backlog <= CATCH_UP_TIMED:
            return 0.0
        if self.backlog_tokens >= BACKLOG_TIMED_TOKENS:
            per_token = self.backlog_seconds / self.backlog_tokens
        elif self.timed_decodes:  # none timed yet: a row of a batch against a one-token decode, guessed
            per_token = BACKLOG_ROW_GUESS * self.timed_seconds / self.timed_decodes
        else:
            return 0.0
        return backlog * per_token

    def _decode_backlog(self, tokens: Sequence[int], seq: int) -> None:
        """Decode tokens it has not seen, without logits, timed as backlog (not a draft position)."""
        if tokens:
            start = self.clock()
            self.ctx.decode(tokens, logits="none", seq=seq)
            self.backlog_seconds += self.clock() - start
            self.backlog_tokens += len(tokens)

    def propose(self, requests: Sequence[DraftRequest]) -> list[Proposal]:
        ctx = self.ctx
        drafted: list[list[int]] = [[] for _ in requests]  # each request's tokens (its Proposal is made at the end)
        live: list[tuple[int, DraftRequest, int]] = []  # (index, request, its k)
        for i, r in enumerate(requests):
            k = min(r.k, ctx.n_ctx - len(r.committed))
            if k > 0:
                ctx.reuse_prefix(r.committed, r.seq)
                live.append((i, r, k))
        # Catch up: each sequence's tokens the draft has not seen (the last accepted draft and the
        # target's token, usually) in one decode for all, logits for the last; a long backlog (a
        # prompt under -k auto) first on its own, in n_batch chunks. Split, a usual catch-up's first
        # token goes in a decode of its own, without logits (catch_up.py).
        mode, usual, caught_up = self.catch_up.mode(), True, 0
        for _, r, _ in live:
            backlog = len(r.committed) - ctx.past(r.seq)
            if backlog > LOCKSTEP_BACKLOG:
                self._decode_backlog(r.committed[ctx.past(r.seq):-1], r.seq)
            usual &= backlog <= CATCH_UP_TIMED
            caught_up = backlog
        timed_before = self.timed_seconds  # a usual step's decodes are all timed: the trial's figure
        if mode == SPLIT and usual:
            self._decode([DecodePart(r.seq, [r.committed[ctx.past(r.seq)]], "none")
                          for _, r, _ in live if len(r.committed) - ctx.past(r.seq) > 1], timed=True, position=False)
        parts = [DecodePart(r.seq, r.committed[ctx.past(r.seq):], "last") for _, r, _ in live]
        first_timed = max((len(p.tokens) for p in parts), default=0) <= CATCH_UP_TIMED
        rows = self._decode(parts, timed=first_timed)
        for _, r, _ in live:  # a recurrent draft model's way back from its rejected drafts (llama/rollback.py)
            ctx.checkpoint(r.seq, keep=False)
        q_rows: dict[int, list[DraftRow]] = {i: [] for i, _, _ in live}
        step, timed = 0, first_timed
        while live:
            keep, next_tokens = [], []
            start = self.clock()
            for (i, r, k), logits in zip(live, rows):
                token, q = _choose(logits, r)
                if token is None:  # p_min: the draft is not sure enough to go on
                    continue
                drafted[i].append(token)
                if q is not None:
                    q_rows[i].append(q)
                    vocab = logits.shape[-1]
                if step + 1 < k:  # the last draft needs no logits of its own
                    keep.append((i, r, k))
                    next_tokens.append(token)
            if timed:  # choosing from a position's logits is part of that position's cost, as verifying is of T(n)
                self.timed_seconds += self.clock() - start
            live, step, timed = keep, step + 1, True
            if live:
                rows = self._decode([DecodePart(r.seq, [t], "last") for (_, r, _), t in zip(live, next_tokens)], timed=True)
        if usual and len(drafted) == 1:  # one sequence after a usual catch-up: the trial may count it
            self.catch_up.record(mode, self.timed_seconds - timed_before, len(drafted[0]), caught_up)
        return [Proposal(tokens, DraftRows(q_rows[i], vocab) if q_rows.get(i) else None)
                for i, tokens in enumerate(drafted)]

    def _decode(self, parts: list[DecodePart], timed: bool, position: bool = True) -> list[np.ndarray]:
        """Decode; `timed`: its seconds count toward the draft positions' cost, and it is a draft
        position unless `position` is False (a split catch-up: a cost of the step's positions)."""
        if not parts:
            return []
        start = self.clock()
        rows = [block[0] for block in self.ctx.decode_parts(parts) if len(block)]  # "none" parts: no row
        if timed:
            self.timed_decodes += position
            self.timed_seconds += self.clock() - start
        return rows

    def prefill(self, seq: int, prompt: Sequence[int]) -> None:
        # Everything but the last token: propose() decodes that one and gets its logits.
        self.ctx.reuse_prefix(prompt, seq)
        self._decode_backlog(prompt[self.ctx.past(seq):-1], seq)

    def rollback(self, seq: int, n_tokens: int) -> None:
        # Its cache holds the committed tokens and the drafts it decoded: the accepted ones stay.
        self.ctx.rollback(min(n_tokens, self.ctx.past(seq)), seq)

    def reset(self) -> None:
        self.ctx.clear()


def _choose(logits: np.ndarray, r: DraftRequest) -> tuple[int | None, DraftRow | None]:
    """The draft's next token (greedy or sampled) and, when sampled, the row it was drawn from (its
    weights: draft_rows.py); None when the top probability falls below the request's p_min."""
    params, p_min = r.config.sampling, r.config.p_min
    if params.greedy:
        if p_min > 0 and _top_probability(logits) < p_min:
            return None, None
        return int(np.argmax(logits)), None
    q = row_weights(logits, params)
    if p_min > 0:
        low, high = q.top_range()
        if low < p_min <= high:  # the bounds do not settle it: the exact top (a pass over the row)
            low, high = q.whole().top_range()
        if high < p_min:
            return None, None
    return q.draw(r.rng), q


def _top_probability(logits: np.ndarray) -> float:
    top = float(logits.max())
    return 1.0 / float(np.exp(logits - top, dtype=np.float32).sum())


# Prompt lookup (the latest match of the last 1-3 tokens) was absorbed by the suffix drafter
# (suffix_drafter.py: longest match, counts, confidence-sized drafts); "lookup" names it.
