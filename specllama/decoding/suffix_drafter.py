"""Suffix drafting (after SuffixDecoding, arXiv 2411.04975): draft from the longest earlier match of
the text's end, in the prompt, the output so far, earlier turns and earlier prompts and outputs of a
batch, or a user corpus, following the continuation most occurrences took. Costs no model decode,
and says how sure it is per token, so the draft length can follow the evidence.

Fits the engine's Drafter protocol (name, propose, prefill, reset). The proposal is deterministic
(q = None) and carries a confidence per token: calibrated acceptance when a Calibrator is given,
else the raw count ratio.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from specllama.decoding.draft_length import Calibrator, choose_draft_length
from specllama.decoding.suffix_index import SuffixIndex
from specllama.errors import SpecllamaError

CORPUS_CHUNK_CHARS = 1 << 16  # the corpus is tokenized and indexed in pieces of about this size
MATCH_GROUPS = 4  # calibration classes by match length: 1-2, 3-7, 8-15, 16+


class DraftCorpusError(SpecllamaError):
    """--draft-corpus names a file that cannot be read as text."""


@dataclass
class SuffixProposal:
    """Duck-compatible with drafters.Proposal (tokens, q) plus what a length policy needs."""
    tokens: list[int]
    q: np.ndarray | None = None  # always None: the draft is looked up, not sampled
    confidence: list[float] = field(default_factory=list)  # per token: calibrated, or raw
    raw_confidence: list[float] = field(default_factory=list)  # count / (occurrences + 1)
    match_length: int = 0


def match_group(length: int) -> int:
    return 0 if length <= 2 else 1 if length <= 7 else 2 if length <= 15 else 3


def raw_confidence(counts: Sequence[int], totals: Sequence[int]) -> list[float]:
    """count(continuation) / (count(context) + 1): a lone occurrence says 0.5, nine out of nine 0.9,
    so the support shows in the number, not only the agreement."""
    return [c / (t + 1) for c, t in zip(counts, totals)]


class SuffixDrafter:
    name = "suffix"

    def __init__(self, index: SuffixIndex | None = None, *, min_match: int = 1,
                 calibrator: Calibrator | None = None,
                 cost_ratio: Callable[[int], float | None] | None = None,
                 min_confidence: float = 0.0):
        self.index = index or SuffixIndex()
        self.min_match = min_match  # shorter matches draft nothing
        self.calibrator = calibrator  # None: confidences are the raw ratios
        self.cost_ratio = cost_ratio  # n -> T(n)/T(1); given, the draft is cut to the best length
        self.min_confidence = min_confidence  # stop the draft at the first token below this
        self.last: SuffixProposal | None = None  # what observe() will judge

    # ---- the Drafter protocol ----------------------------------------------------------------
    def propose(self, committed: Sequence[int], k: int, params=None, rng=None) -> SuffixProposal:
        self.last = None
        if k <= 0 or len(committed) == 0:
            return SuffixProposal([])
        self._sync(committed)
        match = self.index.query(self.index.live_tokens, k)
        if match.length < self.min_match or not match.tokens:
            return SuffixProposal([], match_length=match.length)
        raw = raw_confidence(match.counts, match.totals)
        group = match_group(match.length)
        conf = self.calibrator.calibrate(raw, group) if self.calibrator else list(raw)
        n = len(conf)
        for i, c in enumerate(conf):
            if c < self.min_confidence:
                n = i
                break
        if self.cost_ratio is not None:
            n = choose_draft_length(conf[:n], self.cost_ratio)
        proposal = SuffixProposal(match.tokens[:n], None, conf[:n], raw[:n], match.length)
        self.last = proposal
        return proposal

    def prefill(self, prompt: Sequence[int]) -> None:
        self._sync(prompt)

    def reset(self) -> None:
        """The generation is over: its prompt and output stay as an earlier document (the batch
        runner resets between prompts, so later prompts draft from earlier outputs)."""
        self.index.freeze_live("job")
        self.last = None

    # ---- beyond the protocol -----------------------------------------------------------------
    def observe(self, n_sent: int, n_accepted: int) -> None:
        """Feed the verification of the last proposal to the calibrator."""
        if self.calibrator is not None and self.last is not None:
            self.calibrator.observe(self.last.raw_confidence, n_sent, n_accepted,
                                    match_group(self.last.match_length))
        self.last = None

    def add_document(self, tokens: Sequence[int], kind: str = "turn") -> None:
        """An earlier text to draft from: "turn", "job" or "corpus"."""
        self.index.add_document(tokens, kind)

    def load_corpus(self, path: str | Path, tokenize: Callable[[str], list[int]]) -> int:
        """Index a text file (--draft-corpus) in pieces split at line ends; returns its tokens.
        Oldest-first dropping applies to it like any document once the budget is full."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise DraftCorpusError(f"cannot read draft corpus {path}: {e}") from None
        total = 0
        for piece in _pieces(text, CORPUS_CHUNK_CHARS):
            tokens = tokenize(piece)
            total += len(tokens)
            self.index.add_document(tokens, "corpus")
        return total

    def forget(self) -> None:
        """Drop every document, corpus included."""
        self.index.clear()
        self.last = None

    def _sync(self, committed: Sequence[int]) -> None:
        """Within a generation the committed text only grows: append. A text that leaves the live
        document (a new prompt) keeps the old one as an earlier document and starts afresh; one
        that only cuts it short (a prefix) truncates."""
        tokens = committed if isinstance(committed, list) else list(committed)
        live = self.index.live_tokens
        m = len(live)
        if len(tokens) >= m and tokens[:m] == live:
            self.index.append(tokens[m:])
        elif len(tokens) < m and live[:len(tokens)] == tokens:
            self.index.truncate_live(len(tokens))
        else:
            self.index.freeze_live("turn")
            self.index.append(tokens)


def _pieces(text: str, size: int):
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            cut = text.rfind("\n", start, end)
            end = cut + 1 if cut > start else end
        yield text[start:end]
        start = end
