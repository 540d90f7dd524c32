"""How much of a free draft to send: one that cost no model decode (the suffix drafter's), with an
estimated acceptance per token. Sending n tokens costs only the rows that verify them, so the cut
is where expected tokens per unit of verify time peak (cost/model.best_length with no draft cost),
provided that promises MIN_GAIN over plain decoding."""

from __future__ import annotations

from typing import Sequence

from specllama.decoding.cost.model import Ratio, Rows, best_length, causal_rows, expected_tokens, rate
from specllama.decoding.drafters import Proposal
from specllama.decoding.request import K_AUTO_MAX, K_COPY_MAX

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


def long_enough(proposal: Proposal) -> Proposal:
    """What a free draft may offer before its cut: a near-certain copy as far as it reaches (up to
    K_COPY_MAX, asked for by the policy), anything else K_AUTO_MAX."""
    return proposal.keep(K_AUTO_MAX) if proposal.certain < K_AUTO_MAX else proposal


def cut_free(proposal: Proposal, ratio: Ratio, rows: Rows = causal_rows, reach: int = K_AUTO_MAX) -> Proposal:
    """Trim a free draft to its free_length, on the confidence its tokens came with; never below
    its near-certain lead (Proposal.certain) up to `reach` (a CopyRun's): beyond that a long copy
    is sent only as far as the costs say it pays."""
    known = (proposal.confidence or [])[:len(proposal.tokens)]
    floor = min(proposal.certain, reach)
    return proposal.keep(max(free_length(known, ratio, rows), floor))


class CopyRun:
    """How far a near-certain copy's lead is sent whatever the cost estimate: K_AUTO_MAX, doubled
    after each certain draft the target accepted whole (to K_COPY_MAX), halved (to no less than
    K_AUTO_MAX) by a draft with a rejected token. Doubling lands on whole blocks of rows: 15, 31,
    63 drafts (16, 32, 64 rows with the token verified after them), not 16, 32, 64.

    Why blocks: llama.cpp's kernels work on blocks of rows, and a batch one row past a block pays
    for most of another. Measured through our own decode (logits at every row, spinning threads,
    bench/measured/vm-20261125-verify-rows): 15 rows 339 ms, 16 rows 275 ms, 17 rows 320 ms;
    31/32/33 rows 515/483/495 ms; 63/64/65 rows 936/772/847 ms. So 15 drafts carry 6 % fewer
    tokens than 16 for 14 % less time, and 63 than 64 for 9 % less (32 rows against 33 was within
    noise in this run, 11 % in an earlier one). The cost model learns the row counts
    it sees, but a copy's length is this floor, not its choice, so the floor has to be right.

    Why not the cost model alone: acceptance inside a copy comes in bursts (a file returned with
    one change is accepted for hundreds of tokens, then diverges once at the change), while the
    model prices every token at the class's average odds (0.9-0.95 for 16+ token matches), at
    which a 64-token draft never pays on 2 cores (T(65)/T(1) ~ 25). Doubling bets long only after
    the text has shown a burst, and a divergence wastes at most the one doubled batch. Measured on
    serve's agentic replay with spinning threads: llama-server --spec-default (drafts of 48-64)
    1.22x of plain llama-server, our -k auto at drafts <= 8 1.11x."""

    def __init__(self) -> None:
        self.reach = K_AUTO_MAX

    def observe(self, sent: Proposal, n_accepted: int) -> None:
        if not sent.tokens:
            return
        if n_accepted < len(sent.tokens):
            # One divergence (the edit in a file returned whole) says little of the copy around it:
            # half the reach, not all of it.
            self.reach = max(K_AUTO_MAX, self.reach // 2)
        elif sent.certain:
            self.reach = min(K_COPY_MAX, max(self.reach, row_block(2 * (len(sent.tokens) + 1)) - 1))


def row_block(rows: int) -> int:
    """The largest power of two at most `rows`: the whole blocks of rows a verify batch can fill."""
    return 1 << (max(1, rows).bit_length() - 1)


def free_rate(confidence: Sequence[float], ratio: Ratio, rows: Rows = causal_rows) -> float:
    """Tokens per plain step of a free draft sent at its free_length; 1.0 (plain decoding) when
    none of it is worth sending."""
    n = free_length(confidence, ratio, rows)
    return (rate(expected_tokens(confidence[:n])[n], ratio, n, 0.0, rows(n)) or 1.0) if n else 1.0


def fully_known(proposal: Proposal) -> bool:
    """Whether every token sent carries a confidence (the batch's joint cut may then trim it)."""
    n = len(proposal.tokens)
    return n > 0 and len(proposal.confidence or ()) >= n
