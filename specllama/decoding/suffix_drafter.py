"""Suffix drafting (after SuffixDecoding, arXiv 2411.04975): draft from the longest earlier match of
the text's end, in the prompt, the output so far, earlier texts of the same session (chat turns,
earlier prompts and outputs of a batch) or a user corpus, following the continuation most
occurrences took. Costs no model decode, and says how sure it is per token, so the draft length
follows the evidence (confident: under -k auto it sends all it matched up to the engine's cap, and
the planner cuts that where it pays).

Three kinds of index, queried together; the longest match wins (ties: the live text, then the
session's history, then the corpus, the nearer text being the better guess):
  - live, one per engine slot: that sequence's prompt + output, kept in step with its committed
    tokens (append / truncate), so sequences decoded together never see each other's drafts;
  - history, shared: every finished sequence's text (`finish`) as a "job" document, so the later
    prompts of a batch draft from the earlier ones' outputs;
  - corpus, shared: `--draft-corpus FILE`, static.

Memory bound: history <= HISTORY_TOKENS tokens and corpus <= CORPUS_TOKENS tokens (oldest documents
dropped first; SuffixIndex's bound of 176 bytes per stored position, stored <= 2x retained), and
each slot's live index holds at most its context (n_ctx tokens). With the defaults and 8 slots of
4096 tokens: (2^18 + 2^19 + 8 x 4096) x 2 x 176 B < 0.3 GB worst case, about 60 MB measured with
a 1 MB corpus. `reset()` (the engine's "forget every cache", e.g. between benchmark runs) drops the
live texts and the history, never the corpus: no benchmark run drafts from another's output.

Confidence: per token, count(continuation) / (count(context) + 1), calibrated against the
acceptance observed so far (acceptance.Calibrator, shared by all texts), then blended with this
text's own record (acceptance.TextRecord, one per slot, restarted by each new prompt), both per
draft group: the match's length class and the token's position in the draft (draft_group). Both
learn from every proposal, sent or not: each is followed as the text goes on, until it breaks or
is used up (_judge_shadows). Before any draft was judged, a match's length sets the calibrator's
prior (COLD_FLOORS): a lone earlier occurrence of 16 tokens is a copy in progress, one of 2 tokens
a guess.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from specllama.decoding.acceptance import Calibrator, TextRecord
from specllama.decoding.drafters import DrafterBase, DraftRequest, Proposal
from specllama.decoding.outcome import StepOutcome
from specllama.decoding.proposal import PER_TOKEN, certain_lead
from specllama.decoding.suffix_index import Match, SuffixIndex
from specllama.errors import SpecllamaError

CORPUS_CHUNK_CHARS = 1 << 16  # the corpus is tokenized and indexed in pieces of about this size
MATCH_GROUPS = 4  # calibration classes by match length: 1-2, 3-7, 8-15, 16+
MATCH_STARTS = (1, 3, 8, 16)  # each class's shortest match
MATCH_LABELS = ("1-2", "3-7", "8-15", "16+")
# ... and by the token's position in the draft: 0, 1, 2-3, 4-7, 8-15, 16-31, 32+. Why: what is
# estimated is P(token j accepted | the tokens before it accepted), and in a copy that falls with j
# far less than one odds per match class says. Judged on the agentic replay's texts (every proposal
# followed to its end, bench/measured/vm-20261126-greedy-answers): a draft's first token was right
# 0.86 of the time, each later one 0.97 given those before; one odds per class priced a 16-row
# draft after a 3-7 token match at 0.77x of plain where such drafts ran at 1.06-1.35x, so after
# every edit -k auto waited for the match to grow. Replayed: auto 1.299x -> 1.354x of plain on the
# agentic texts, 1.321x -> 1.346x on held-out edit sessions, prose within +-0.5 %; finer match
# classes or fewer position classes did worse (bench/measured/vm-20261126-policy-replay-positions.md).
POSITION_EDGES = (0, 1, 3, 7, 15, 31)
POSITION_CLASSES = len(POSITION_EDGES) + 1
POSITION_LABELS = ("1st", "2nd", "3-4th", "5-8th", "9-16th", "17-32nd", "33rd+")
DRAFT_GROUPS = MATCH_GROUPS * POSITION_CLASSES
# What a match's length says before this run has judged any draft: the calibrator's prior per
# match-length class is at least this. A lone earlier occurrence (raw 0.5) was otherwise taken at
# its word, 0.55, whatever its length, and at 0.55 no draft promises planner.MIN_GAIN: a cold
# drafter never drafted text seen once, e.g. an agent's re-sent file (serve's agentic replay:
# auto 0.96x where a fixed K = 4 drafted 553 of 827 steps and ran at 1.10x). Measured with fixed
# K = 8 on 23 prompts none of bench/prompts.jsonl (bench/measured/vm-20261123-suffix-calibration.md),
# lone occurrences were accepted 0.82 (3-7 tokens matched, n=100), 0.95 (8-15, n=74) and 0.95
# (16+, n=110); 1-2 tokens 0.69, but mostly from near-identical prompts, so that class keeps its
# midpoint. The floors sit below what was observed: four judged drafts move a bin halfway to what
# this run sees (Calibrator.prior_weight).
COLD_FLOORS = (0.0, 0.75, 0.85, 0.9)
HISTORY_TOKENS = 1 << 18  # finished texts of this session kept to draft from (~1 MB of text)
CORPUS_TOKENS = 1 << 19  # --draft-corpus tokens kept (a 1 MB file is ~360k)
# A match of the last token alone is no evidence: on bench/prompts.jsonl (code-prime, sql) such
# drafts were accepted 2 times in 7 and 1 in 8, while copies match several tokens at once.
MIN_MATCH = 2
# A match this long whose class is calibrated at proposal.NEAR_CERTAIN_ODDS or more is a copy in progress:
# its draft is marked certain (Proposal.certain), sent even when the step costs are not yet known
# or one noisy batched step made them look dear. Observed: 16+ token matches accepted 0.95 (n=110,
# greedy, vm-20261123-suffix-calibration.md); a fresh `serve` drafted nothing from a re-sent file
# while its cost estimate was a prior (issue 29).
NEAR_CERTAIN_MATCH = 16
# Proposals followed at once per slot (each judged as the text goes on): bounds the per-step work
# (a copy proposes the same text every step, each held until it breaks or is used up, <= 63 tokens).
MAX_FOLLOWED = 16


class DraftCorpusError(SpecllamaError):
    """--draft-corpus names a file that cannot be read as text."""


@dataclass(frozen=True)
class SuffixProposal(Proposal):
    """A Proposal plus what observe() needs to feed the calibrator."""
    raw_confidence: tuple[float, ...] = field(default=(), metadata=PER_TOKEN)  # count / (occurrences + 1)
    match_length: int = 0
    where: str = ""  # "live", "history" or "corpus": which index matched


# A corpus larger than this is a mistake (a disk image, a device), not text to draft from.
MAX_CORPUS_BYTES = 256 << 20


def read_corpus(path: str | Path) -> str:
    """The corpus text, or DraftCorpusError in one line (checked before any model loads, too)."""
    try:
        info = Path(path).stat()
        if not stat.S_ISREG(info.st_mode):  # /dev/zero, a pipe: read until memory runs out
            raise DraftCorpusError(f"draft corpus {path} is not a regular file")
        if info.st_size > MAX_CORPUS_BYTES:
            raise DraftCorpusError(f"draft corpus {path} is {info.st_size / 2**20:,.0f} MiB; at most "
                                   f"{MAX_CORPUS_BYTES >> 20} MiB is read (its index is held in memory)")
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DraftCorpusError(f"cannot read draft corpus {path}: not UTF-8 text") from None
    except OSError as e:
        raise DraftCorpusError(f"cannot read draft corpus {path}: {e.strerror or e}") from None


def match_group(length: int) -> int:
    return 0 if length <= 2 else 1 if length <= 7 else 2 if length <= 15 else 3


def position_class(j: int) -> int:
    return next((i for i, edge in enumerate(POSITION_EDGES) if j <= edge), len(POSITION_EDGES))


_POSITION_CLASS = tuple(position_class(j) for j in range(128))  # read every proposal, for each of its tokens


def draft_group(match_length: int, j: int) -> int:
    """The calibration group of a draft's token j: its match class and its position."""
    return match_group(match_length) * POSITION_CLASSES + (_POSITION_CLASS[j] if j < 128 else POSITION_CLASSES - 1)


def draft_groups(match_length: int, n: int) -> list[int]:
    base = match_group(match_length) * POSITION_CLASSES
    return [base + (_POSITION_CLASS[j] if j < 128 else POSITION_CLASSES - 1) for j in range(n)]


def group_label(group: int) -> str:
    m, j = divmod(group, POSITION_CLASSES)
    return f"match {MATCH_LABELS[min(m, MATCH_GROUPS - 1)]}, {POSITION_LABELS[j]} token"


def draft_floors() -> tuple[float, ...]:
    """The calibrator's floor per draft group: the cold floor of the match class the match has
    reached at that position if the tokens before were right (a 2-token match's 5th token is a
    7-token match's next one)."""
    first = (0,) + tuple(edge + 1 for edge in POSITION_EDGES)
    return tuple(COLD_FLOORS[match_group(start + first[j])] for start in MATCH_STARTS for j in range(POSITION_CLASSES))


def suffix_calibrator(**kwargs) -> Calibrator:
    """The suffix drafter's calibrator: one per draft group, with the cold floors."""
    return Calibrator(groups=DRAFT_GROUPS, floors=draft_floors(), **kwargs)


def raw_confidence(counts: Sequence[int], totals: Sequence[int]) -> list[float]:
    """count(continuation) / (count(context) + 1): a lone occurrence says 0.5, nine out of nine 0.9,
    so the support shows in the number, not only the agreement."""
    return [c / (t + 1) for c, t in zip(counts, totals)]


class SuffixDrafter(DrafterBase):
    name = "suffix"
    free = True
    confident = True

    def __init__(self, *, calibrator: Calibrator | None = None, min_match: int = MIN_MATCH,
                 history_tokens: int = HISTORY_TOKENS, corpus_tokens: int = CORPUS_TOKENS):
        self.calibrator = calibrator or suffix_calibrator()
        self.min_match = min_match  # shorter matches draft nothing
        self.history = SuffixIndex(token_budget=history_tokens)
        self.corpus = SuffixIndex(token_budget=corpus_tokens)
        self.live: dict[int, SuffixIndex] = {}  # engine slot -> that sequence's text
        self.shadows: dict[int, list[_Shadow]] = {}  # engine slot -> its proposals followed as its text moves on
        self.texts: dict[int, TextRecord] = {}  # engine slot -> its text's own acceptance per draft group

    # ---- the Drafter protocol ----------------------------------------------------------------
    def propose(self, requests: Sequence[DraftRequest]) -> list[Proposal]:
        return [self._propose_one(r) for r in requests]

    def _propose_one(self, r: DraftRequest) -> SuffixProposal:
        if r.k <= 0 or len(r.committed) == 0:
            return SuffixProposal([], source=self.name)
        self._judge_shadows(r.seq, r.committed)
        live = self._live(r.seq)
        live.sync_live(r.committed)
        context = live.live_tokens
        match, where = Match(0, 0), ""
        for name, index in (("live", live), ("history", self.history), ("corpus", self.corpus)):
            if index.stored_positions == 0:
                continue
            found = index.query(context, r.k)
            if found.length > match.length and found.tokens:
                match, where = found, name
        if match.length < self.min_match or not match.tokens:
            return SuffixProposal([], source=self.name, match_length=match.length)
        raw = raw_confidence(match.counts, match.totals)
        conf = self._odds(r.seq, raw, draft_groups(match.length, len(raw)))
        certain = certain_lead(conf, len(conf)) if match.length >= NEAR_CERTAIN_MATCH else 0
        # All that matched, up to the cap: under -k auto the policy cuts it where it pays.
        proposal = SuffixProposal(match.tokens, None, conf, self.name, certain, raw, match.length, where)
        followed = self.shadows.setdefault(r.seq, [])
        del followed[:max(0, len(followed) + 1 - MAX_FOLLOWED)]  # the oldest go first
        followed.append(_Shadow(proposal, len(r.committed)))
        return proposal

    def prefill(self, seq: int, prompt: Sequence[int]) -> None:
        self.shadows.pop(seq, None)  # a new text on this slot: the last one's proposals are not its,
        self.texts.pop(seq, None)  # nor the last one's record
        self._live(seq).sync_live(prompt)

    def rollback(self, seq: int, n_tokens: int) -> None:
        # Nothing drafted enters the live index before it is committed; a cut (a failed decode
        # rolls a slot back to 0) truncates it.
        live = self.live.get(seq)
        if live is not None and n_tokens < len(live.live_tokens):
            live.truncate_live(n_tokens)
        if seq in self.shadows:  # a proposal whose text (or the part it was judged on) is gone goes too
            self.shadows[seq] = [s for s in self.shadows[seq] if s.at + s.judged <= n_tokens]

    def observe(self, seq: int, outcome: StepOutcome) -> None:
        """Feed the verification of what was sent (the policy may have cut it) to the calibrator
        and the text's record: each judged token with the odds the target accepted it with."""
        sent = outcome.sent
        if sent.tokens and isinstance(sent, SuffixProposal):
            for raw, odds, group in zip(sent.raw_confidence, outcome.odds, draft_groups(sent.match_length, len(sent.tokens))):
                self._learn(seq, raw, odds, group)
            followed = self.shadows.get(seq)
            if followed and followed[-1].proposal.tokens[:len(sent.tokens)] == sent.tokens:
                # What the target judged is learnt above; the proposal is followed on after it only
                # when every sent token passed (past a rejection, its later tokens say nothing).
                if outcome.n_accepted == len(sent.tokens):
                    followed[-1].judged = len(sent.tokens)
                else:
                    followed.pop()

    def finish(self, seq: int, committed: Sequence[int]) -> None:
        """The sequence's text joins the history; its slot's live index is kept (the next prompt
        there, e.g. a chat's next turn, usually extends it: only the difference is indexed)."""
        self.history.add_document(list(committed), "job")

    def reset(self) -> None:
        self.live.clear()
        self.shadows.clear()
        self.texts.clear()
        self.history.clear()

    # ---- beyond the protocol -----------------------------------------------------------------
    def add_document(self, tokens: Sequence[int], kind: str = "turn") -> None:
        """An earlier text to draft from ("turn" or "job")."""
        self.history.add_document(tokens, kind)

    def load_corpus(self, path: str | Path, tokenize: Callable[[str], list[int]]) -> int:
        """Index a text file (--draft-corpus) in pieces split at line ends; returns its tokens.
        Beyond corpus_tokens the file's start is dropped (oldest first)."""
        text = read_corpus(path)
        total = 0
        for piece in _pieces(text, CORPUS_CHUNK_CHARS):
            tokens = tokenize(piece)
            total += len(tokens)
            self.corpus.add_document(tokens, "corpus")
        return total

    def _judge_shadows(self, seq: int, committed: Sequence[int]) -> None:
        """Calibrate on the slot's proposals against what the text did next, sent or not: each
        proposal is followed token by token as the text commits them, until one differs or it is
        used up, so a copy the policy did not send still teaches the later positions' groups.

        Why: the calibrator otherwise learns only from drafts the policy sent, and the policy sends
        only what the calibrator already trusts, so a class it starts out doubting is never tried
        and never learnt. On the agentic replay's texts (bench/measured/vm-20261126-greedy-answers)
        a match of 3-15 tokens right after an edit gave the right next token 0.88-0.96 of the time,
        against the 0.75-0.85 its class started at, and the copy then went on for 20-30 tokens while
        every step waited for the match to reach 16. The target's committed token is its greedy
        choice, exactly what verification accepts; under sampling it equals a deterministic draft
        token with probability p(token), the odds the verifier would accept that token with."""
        followed = []
        for shadow in self.shadows.get(seq, ()):
            proposal, at = shadow.proposal, shadow.at
            for i in range(shadow.judged, min(len(proposal.tokens), len(committed) - at)):
                hit = committed[at + i] == proposal.tokens[i]
                self._learn(seq, proposal.raw_confidence[i], hit, draft_group(proposal.match_length, i))
                if not hit:
                    break
                shadow.judged = i + 1
            else:
                if shadow.judged < len(proposal.tokens):  # neither wrong nor used up: followed on
                    followed.append(shadow)
        self.shadows[seq] = followed

    def _odds(self, seq: int, raw: Sequence[float], groups: Sequence[int]) -> list[float]:
        """Each token's odds: its raw confidence calibrated in its group, blended with this text's
        record there (a proposal repeats few (raw, group) pairs: each is worked out once)."""
        text, known = self._text(seq), {}
        out = []
        for c, g in zip(raw, groups):
            odds = known.get((c, g))
            if odds is None:
                odds = known[(c, g)] = text.predict(self.calibrator.predict(c, g), g)
            out.append(odds)
        return out

    def _learn(self, seq: int, raw: float, odds: float, group: int) -> None:
        """One judged token of this slot's text (1/0, or the odds it was accepted with): the shared
        calibration and the text's own record learn it alike."""
        self.calibrator.update(raw, odds, group)
        self._text(seq).observe(group, odds)

    def _text(self, seq: int) -> TextRecord:
        record = self.texts.get(seq)
        if record is None:
            record = self.texts[seq] = TextRecord()
        return record

    def _live(self, seq: int) -> SuffixIndex:
        index = self.live.get(seq)
        if index is None:
            # A live document is never dropped, so no budget applies: it is bounded by the context.
            index = self.live[seq] = SuffixIndex(token_budget=1 << 30)
        return index


@dataclass
class _Shadow:
    """A slot's proposal, followed: judged against the tokens committed after it."""
    proposal: SuffixProposal
    at: int  # the committed length it was proposed at
    judged: int = 0  # leading tokens judged right so far (by verification or the text)


def _pieces(text: str, size: int):
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            cut = text.rfind("\n", start, end)
            end = cut + 1 if cut > start else end
        yield text[start:end]
        start = end
