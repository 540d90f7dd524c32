"""How much of a free draft to send: one that cost no model decode (the suffix drafter's), with an
estimated acceptance per token. Sending n tokens costs only the rows that verify them, so the cut
is where expected tokens per unit of verify time peak (cost/model.best_length with no draft cost),
provided that promises MIN_GAIN over plain decoding."""

from __future__ import annotations

from typing import Sequence

from specllama.decoding.cost.model import Ratio, Rows, best_length, causal_rows, expected_tokens, rate, whole_blocks
from specllama.decoding.drafters import Proposal
from specllama.decoding.proposal import odds_lead
from specllama.decoding.request import K_AUTO_MAX

# A free draft is sent under -k auto only when it promises this much over plain decoding. Both
# sides of the promise are uncertain: T(2)/T(1) measured on this shared 2-core machine came out
# 1.31, 1.46, 1.54 and 1.67 on different runs, and a text's acceptance is known from a few drafts.
# On bench/prompts.jsonl the one-token guesses (match of 1-3 tokens, 25-45 % accepted) lost 5-13 %
# on the prose and SQL prompts at a 5 % margin; the copies that pay promise 1.2x and more.
MIN_GAIN = 1.15
# A near-certain copy's first tokens are sent whatever the cost estimate says, so that a prior, or
# one noisy batched step that made batches look dear, cannot stop the drafts that would correct it
# (issue 29: a fresh serve drafted nothing from a re-sent file). How far the copy goes beyond them
# is the cost model's call on the text's own odds (acceptance.TextRecord). Replayed on recorded
# answers (bench/measured/vm-20261126-policy-replay-text-record.md): a floor of 4 against 8 gave
# held-out prompts 1.014x against 0.990x (a failed copy's 8 rows cost what 5 plain steps do on
# 2 cores) and the agentic texts 1.197x against 1.195x; no floor 1.181x.
CERTAIN_FLOOR = 4


def free_length(confidence: Sequence[float], ratio: Ratio, rows: Rows = causal_rows) -> int:
    """How much of a free draft to send: the length where expected tokens per unit of verify time
    peak, if that promises MIN_GAIN; else 0. Past one block of rows, only whole blocks
    (cost/model.whole_blocks)."""
    return best_length(confidence, whole_blocks(ratio), min_gain=MIN_GAIN, rows=rows)


# Past K_AUTO_MAX, the leading tokens a free draft holds at LIKELY_ODDS or more, up to LIKELY_MAX: a copy
# that resumed after an edit is sure of itself long before its match is NEAR_CERTAIN_MATCH tokens again,
# and was held to 8 tokens a step (9 rows) where 16 rows cost little more (the 2-core machine measured
# 4.4 and 4.9 plain steps, bench/measured/vm-20261128-r5-verify-rows-dense; on its older host 16 cost less
# than 9). Replayed from fresh costs (bench/measured/vm-20261128-r5-policy-replay-likely.md): the agentic
# texts +5 % on both AMD curves, +0.6 % Xeon, 0 H200; held-out edit sessions +0.8 / +1.6 / +1.1 / -0.5 %;
# prose and code written afresh within 0.5 %. At 0.95 nothing changed; the cap alone raised to 15 lost up
# to 1.3 % on prose where uncertain matches went long.
LIKELY_ODDS = 0.9
LIKELY_MAX = 15  # with the token after them, 16 rows: one block of llama.cpp's CPU kernels


def long_enough(proposal: Proposal) -> Proposal:
    """What a free draft may offer before its cut: a near-certain copy as far as it reaches (up to
    K_COPY_MAX, asked for by the policy); else K_AUTO_MAX, or its lead at LIKELY_ODDS up to LIKELY_MAX."""
    if proposal.certain >= K_AUTO_MAX:
        return proposal
    return proposal.keep(max(K_AUTO_MAX, odds_lead(proposal.confidence or (), LIKELY_ODDS, LIKELY_MAX)))


def cut_free(proposal: Proposal, ratio: Ratio, rows: Rows = causal_rows) -> Proposal:
    """Trim a free draft to its free_length, on the confidence its tokens came with; never below
    its near-certain lead (Proposal.certain) up to CERTAIN_FLOOR."""
    known = (proposal.confidence or [])[:len(proposal.tokens)]
    floor = min(proposal.certain, CERTAIN_FLOOR)
    return proposal.keep(max(free_length(known, ratio, rows), floor))


def free_rate(confidence: Sequence[float], ratio: Ratio, rows: Rows = causal_rows) -> float:
    """Tokens per plain step of a free draft sent at its free_length; 1.0 (plain decoding) when
    none of it is worth sending."""
    n = free_length(confidence, ratio, rows)
    return (rate(expected_tokens(confidence[:n])[n], ratio, n, 0.0, rows(n)) or 1.0) if n else 1.0


def fully_known(proposal: Proposal) -> bool:
    """Whether every token sent carries a confidence (the batch's joint cut may then trim it)."""
    n = len(proposal.tokens)
    return n > 0 and len(proposal.confidence or ()) >= n
