"""How much of a free draft to send: one that cost no model decode (the suffix drafter's), with an
estimated acceptance per token. Sending n tokens costs only the rows that verify them, so the cut
is where expected tokens per unit of verify time peak (cost/model.best_length with no draft cost),
provided that promises MIN_GAIN over plain decoding."""

from __future__ import annotations

from typing import Sequence

from specllama.decoding.cost.model import Ratio, Rows, best_length, causal_rows, expected_tokens, rate
from specllama.decoding.drafters import Proposal
from specllama.decoding.request import K_AUTO_MAX

# A free draft is sent under -k auto only when it promises this much over plain decoding. Both
# sides of the promise are uncertain: T(2)/T(1) measured on this shared 2-core machine came out
# 1.31, 1.46, 1.54 and 1.67 on different runs, and a text's acceptance is known from a few drafts.
# On bench/prompts.jsonl the one-token guesses (match of 1-3 tokens, 25-45 % accepted) lost 5-13 %
# on the prose and SQL prompts at a 5 % margin; the copies that pay promise 1.2x and more.
MIN_GAIN = 1.15


def free_length(confidence: Sequence[float], ratio: Ratio, rows: Rows = causal_rows) -> int:
    """How much of a free draft to send: the length where expected tokens per unit of verify time
    peak, if that promises MIN_GAIN; else 0."""
    return best_length(confidence, ratio, min_gain=MIN_GAIN, rows=rows)


def long_enough(proposal: Proposal) -> None:
    """What a free draft may offer before its cut: a near-certain copy as far as it reaches (up to
    K_COPY_MAX, asked for by the policy), anything else K_AUTO_MAX."""
    if proposal.certain < K_AUTO_MAX:
        proposal.tokens = proposal.tokens[:K_AUTO_MAX]


def cut_free(proposal: Proposal, ratio: Ratio, rows: Rows = causal_rows) -> None:
    """Trim a free draft to its free_length, on the confidence its tokens came with; never below
    its near-certain lead (Proposal.certain) up to K_AUTO_MAX: beyond that a long copy is sent only
    as far as the costs say it pays (one rejected token early in a 64-token draft wastes a batch
    that costs ~20 plain steps on 2 cores)."""
    known = (proposal.confidence or [])[:len(proposal.tokens)]
    floor = min(proposal.certain, K_AUTO_MAX)
    proposal.tokens = proposal.tokens[:max(free_length(known, ratio, rows), floor)]


def free_rate(confidence: Sequence[float], ratio: Ratio, rows: Rows = causal_rows) -> float:
    """Tokens per plain step of a free draft sent at its free_length; 1.0 (plain decoding) when
    none of it is worth sending."""
    n = free_length(confidence, ratio, rows)
    return (rate(expected_tokens(confidence[:n])[n], ratio, n, 0.0, rows(n)) or 1.0) if n else 1.0


def fully_known(proposal: Proposal) -> bool:
    """Whether every token sent carries a confidence (the batch's joint cut may then trim it)."""
    n = len(proposal.tokens)
    return n > 0 and len(proposal.confidence or ()) >= n
