"""Drafts from the target's own multi-token-prediction layer (`--drafter mtp`): no second model
to download, the MTP head rides in the target's GGUF (Qwen3.5/3.6 and others; llama/mtp.py).

Like the draft model, it decodes once per draft position, all sequences in lockstep; unlike it, it
needs no catch-up while it is followed: every target decode is handed to it as it happens. A
policy that finds it not paying for a sequence stops that (`follow`): following costs an MTP
decode beside every target decode, drafting or not. Its drafts are greedy or sampled from its own
distribution (q for the rejection sampler), as the draft model's are.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

from specllama.decoding.draft_rows import DraftRow, DraftRows
from specllama.decoding.drafters import DrafterBase, DraftRequest, _choose
from specllama.decoding.proposal import Proposal
from specllama.llama.mtp import MtpContext


class MtpDrafter(DrafterBase):
    name = "mtp"
    free = False

    def __init__(self, mtp: MtpContext, clock: Callable[[], float] = time.perf_counter):
        self.mtp = mtp
        self.clock = clock
        self.timed_decodes = 0
        self.timed_seconds = 0.0

    def timing(self) -> tuple[int, float]:
        return self.timed_decodes, self.timed_seconds

    def follow(self, seq: int, on: bool) -> None:
        """Whether the head follows this sequence's target decodes (llama/mtp.py: off, it only
        keeps their states, and catches up in one batch when it drafts again)."""
        self.mtp.follow(seq, on)

    def finish(self, seq: int, committed: Sequence[int]) -> None:
        # The slot's next request may name the head (--drafter mtp, a server's request): it starts
        # followed, as a slot never paused does.
        self.mtp.follow(seq, True)

    def propose(self, requests: Sequence[DraftRequest]) -> list[Proposal]:
        drafted: list[list[int]] = [[] for _ in requests]  # each request's tokens (its Proposal is made at the end)
        q_rows: dict[int, list[DraftRow]] = {i: [] for i in range(len(requests))}
        # (index, request, its k, the token to decode, its position, the MTP state for it or None)
        depth = self.mtp.max_depth  # chained heads: one draft position a head
        live = [(i, r, min(r.k, depth or r.k), r.committed[-1], len(r.committed) - 1, None)
                for i, r in enumerate(requests) if r.k > 0]
        starts = {r.seq: len(r.committed) - 1 for _, r, *_ in live}
        for seq, pos in starts.items():  # what it missed while not followed: not a draft position's cost
            self.mtp.catch_up(seq, pos)
        while live:
            start = self.clock()
            results = self.mtp.draft_step([(r.seq, token, pos, state) for _, r, _, token, pos, state in live])
            keep = []
            for (i, r, k, _, pos, _), (logits, state) in zip(live, results):
                token, q = _choose(logits, r)
                if token is None:
                    continue
                drafted[i].append(token)
                if q is not None:
                    q_rows[i].append(q)
                    vocab = logits.shape[-1]
                if len(drafted[i]) < k:
                    keep.append((i, r, k, token, pos + 1, state))
            # A draft position's cost: the head's decode and choosing from its logits (drafters.py's too).
            self.timed_decodes += 1
            self.timed_seconds += self.clock() - start
            live = keep
        for seq, pos0 in starts.items():
            self.mtp.drop_drafts(seq, pos0)
        return [Proposal(tokens, DraftRows(q_rows[i], vocab) if q_rows[i] else None) for i, tokens in enumerate(drafted)]

    def reset(self) -> None:
        self.mtp.cleared(None)
