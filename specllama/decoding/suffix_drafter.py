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
draft group: where the match lies (in what the text was given, or in its own output so far), its
length class and the token's position in the draft (draft_group). Both learn from every proposal,
sent or not: each is followed as the text goes on, until it breaks or is used up (_judge_shadows).
Before any draft was judged, a match's length sets the calibrator's prior (COLD_FLOORS): a lone
earlier occurrence of 16 tokens is a copy in progress, one of 2 tokens a guess; 3-7 tokens of the
prompt are a likely copy, of the text's own output a guess (OWN_COLD_FLOORS).
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
from specllama.decoding.suffix_groups import draft_group, draft_groups, suffix_calibrator
from specllama.decoding.suffix_index import ContextKey, SuffixIndex
from specllama.decoding.suffix_renames import Renames
from specllama.errors import SpecllamaError

CORPUS_CHUNK_CHARS = 1 << 16  # the corpus is tokenized and indexed in pieces of about this size
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
    own: bool = False  # the match lies in this text's own output (suffix_groups.SOURCES)


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
        self.renames: dict[int, Renames] = {}  # engine slot -> what its text renames in what it copies
        self.prompt_ends: dict[int, int] = {}  # engine slot -> where its text's own output starts in its live text
        # engine slot -> (its text's length, the longest match found, self.documents_added) at its last
        # query: what the next query can find at most (_reach)
        self.reach: dict[int, tuple[int, int, int]] = {}
        self.documents_added = 0  # documents the history and corpus gained: a new one may hold any match
        self.synced: dict[int, Sequence[int]] = {}  # engine slot -> the committed list its live index follows (_catch_up)

    # ---- the Drafter protocol ----------------------------------------------------------------
    def propose(self, requests: Sequence[DraftRequest]) -> list[Proposal]:
        return [self._propose_one(r) for r in requests]

    def _propose_one(self, r: DraftRequest) -> SuffixProposal:
        if r.k <= 0 or len(r.committed) == 0:
            return SuffixProposal([], source=self.name)
        self._judge_shadows(r.seq, r.committed)
        renames = self.renames.get(r.seq)
        if renames is not None and renames.follow(r.committed):
            self.reach.pop(r.seq, None)  # a new rename may make a longer match than the last query found
        renaming = renames is not None and renames.any_used
        reach = None if renaming else self._reach(r.seq, len(r.committed))
        if reach is not None and reach < self.min_match:
            return SuffixProposal([], source=self.name)
        live = self._live(r.seq)
        self._catch_up(r.seq, live, r.committed)
        context = live.live_tokens
        depth = max(live.max_match, self.history.max_match, self.corpus.max_match)
        # No match can be longer than the reach: levels and comparisons past it are skipped.
        bound = depth if reach is None else max(1, min(depth, reach))
        length, positions, where, best = self._longest(context, live.live_key(bound), live, bound)
        through = False  # found through the renames
        if renaming:
            # The text's end as the source has it, its new names read back as the old: where the
            # source's line goes on after "tmp +=", the text's "buffer +=" is found too.
            tail = context[-depth:]
            read = renames.as_source(tail)
            if read != tail:
                found = self._longest(read, ContextKey.of(read, depth), live)
                if found[0] > length:
                    length, positions, where, best = found
                    through = True
        self.reach[r.seq] = (len(context), length, self.documents_added)
        if length < self.min_match:
            # Nothing to draft from: the path after the match is not walked (on the held-out texts
            # most steps' longest match is a token or two; the walk was a fifth of asking's time).
            return SuffixProposal([], source=self.name, match_length=length)
        match = best.follow(length, positions, r.k)
        tokens, raw = match.tokens, raw_confidence(match.counts, match.totals)
        renamed: dict[int, tuple[int, ...]] = {}
        if renaming:
            tokens, origin, by = renames.as_text(tokens)
            tokens, raw = tokens[:r.k], [raw[i] for i in origin[:r.k]]
            renamed = {j: old for j, old in enumerate(by[:r.k]) if old is not None}
        own = where == "live" and live.live_offset(match.at) >= self.prompt_ends.get(r.seq, len(context))
        conf = self._odds(r.seq, raw, draft_groups(match.length, len(raw), own))
        certain = certain_lead(conf, len(conf)) if match.length >= NEAR_CERTAIN_MATCH else 0
        # All that matched, up to the cap: under -k auto the policy cuts it where it pays.
        proposal = SuffixProposal(tokens, None, conf, self.name, certain, raw, match.length, where, own)
        followed = self.shadows.setdefault(r.seq, [])
        del followed[:max(0, len(followed) + 1 - MAX_FOLLOWED)]  # the oldest go first
        followed.append(_Shadow(proposal, len(r.committed), renamed=renamed, renamed_copy=through or bool(renamed)))
        return proposal

    def _longest(self, context: Sequence[int], key: ContextKey, live: SuffixIndex, limit: int | None = None):
        """(length, positions, index name, index) of the longest match of the context's end in the
        slot's live text, the history or the corpus (ties: the nearer), of at most `limit` tokens
        (a bound known to hold: _reach)."""
        length, positions, where, best = 0, None, "", None
        for name, index in (("live", live), ("history", self.history), ("corpus", self.corpus)):
            if index.stored_positions == 0:
                continue
            found, ps = index.longest_match(context, key, limit)
            if found > length and len(ps):  # every position found has a continuation
                length, positions, where, best = found, ps, name, index
        return length, positions, where, best

    def _reach(self, seq: int, length: int) -> int | None:
        """The longest match this slot's text, now `length` tokens, can have, from its last query
        alone (None: unknown): a match of L tokens now means one of L - g tokens g tokens ago (the
        same occurrence, shorter), so the longest match can grow by at most the tokens added since,
        unless a document joined the history or corpus (which may hold any match).
        Below min_match no lookup is made: the usual case is the step after one whose last token
        never occurred before, a quarter of the steps on the held-out and tuning texts, a tenth on
        the agentic ones (policy_replay's recorded answers), each a whole lookup saved (the index
        catches up on the tokens at the next one). Above it the lookup skips the longer windows
        (on prose most steps' reach is 2-4 tokens): with the append below, 43 -> 40 us a proposal
        on unseen4's answers and 109 -> 100 on the agentic ones, warm (scripts/measure/propose_cost.py:
        what a GPU step pays); on a CPU whose decode empties the caches, no change measured (~157 us
        with --cold-mb 128: there the cost is the memory each step touches, not the Python)."""
        last = self.reach.get(seq)
        if last is None or last[2] != self.documents_added or length < last[0]:
            return None
        return last[1] + (length - last[0])

    def _catch_up(self, seq: int, live: SuffixIndex, committed: Sequence[int]) -> None:
        """The live index made equal to the committed tokens. The engine hands the same list every
        step (Slot.committed, which only grows; what the caches drop is told by rollback()), so once
        synced from that list the index only appends its new tokens, where sync_live compares the
        whole text (copied and compared each step: ~1,000 tokens on a held-out prompt). The check of
        the last synced token guards a caller that reuses a list in other ways."""
        done = len(live.live_tokens)
        if self.synced.get(seq) is committed and len(committed) >= done and \
                (done == 0 or committed[done - 1] == live.live_tokens[-1]):
            live.append(committed[done:])
        else:
            live.sync_live(committed)
        self.synced[seq] = committed

    def prefill(self, seq: int, prompt: Sequence[int]) -> None:
        self.reach.pop(seq, None)
        self.synced.pop(seq, None)  # compared in full: the new prompt may differ anywhere
        self.shadows.pop(seq, None)  # a new text on this slot: the last one's proposals are not its,
        self.texts.pop(seq, None)  # nor the last one's record,
        self.renames.pop(seq, None)  # nor its renames
        self._live(seq).sync_live(prompt)
        self.prompt_ends[seq] = len(prompt)

    def rollback(self, seq: int, n_tokens: int) -> None:
        # Nothing drafted enters the live index before it is committed; a cut (a failed decode
        # rolls a slot back to 0) truncates it.
        live = self.live.get(seq)
        if live is not None and n_tokens < len(live.live_tokens):
            live.truncate_live(n_tokens)
        if n_tokens < self.reach.get(seq, (0,))[0]:  # its text is shorter than at its last query
            self.reach.pop(seq, None)
        if seq in self.shadows:  # a proposal whose text (or the part it was judged on) is gone goes too
            self.shadows[seq] = [s for s in self.shadows[seq] if s.at + s.judged <= n_tokens]
        if seq in self.renames:  # and a break whose text is gone (the renames learnt stay)
            self.renames[seq].pending = [b for b in self.renames[seq].pending if b.at < n_tokens]

    def observe(self, seq: int, outcome: StepOutcome) -> None:
        """Feed the verification of what was sent (the policy may have cut it) to the calibrator
        and the text's record: each judged token with the odds the target accepted it with."""
        sent = outcome.sent
        if sent.tokens and isinstance(sent, SuffixProposal):
            followed = self.shadows.get(seq)
            mine = bool(followed) and followed[-1].proposal.tokens[:len(sent.tokens)] == sent.tokens
            groups = draft_groups(sent.match_length, len(sent.tokens), sent.own)
            for raw, odds, group in zip(sent.raw_confidence, outcome.odds, groups):
                self._learn(seq, raw, odds, group, shared=not (mine and followed[-1].renamed_copy))
            if mine:
                shadow, accepted = followed[-1], outcome.n_accepted
                self._judge_renames(seq, shadow, range(min(len(sent.tokens), accepted + 1)), accepted)
                # What the target judged is learnt above; the proposal is followed on after it only
                # when every sent token passed (past a rejection, its later tokens say nothing).
                if accepted == len(sent.tokens):
                    shadow.judged = len(sent.tokens)
                else:
                    self._renames(seq).broke(shadow.at + accepted, shadow.proposal.tokens[accepted:])
                    followed.pop()

    def finish(self, seq: int, committed: Sequence[int]) -> None:
        """The sequence's text joins the history; its slot's live index is kept (the next prompt
        there, e.g. a chat's next turn, usually extends it: only the difference is indexed)."""
        self.history.add_document(list(committed), "job")
        self.documents_added += 1

    def reset(self) -> None:
        self.live.clear()
        self.shadows.clear()
        self.texts.clear()
        self.renames.clear()
        self.prompt_ends.clear()
        self.reach.clear()
        self.synced.clear()
        self.history.clear()

    # ---- beyond the protocol -----------------------------------------------------------------
    def add_document(self, tokens: Sequence[int], kind: str = "turn") -> None:
        """An earlier text to draft from ("turn" or "job")."""
        self.history.add_document(tokens, kind)
        self.documents_added += 1

    def load_corpus(self, path: str | Path, tokenize: Callable[[str], list[int]]) -> int:
        """Index a text file (--draft-corpus) in pieces split at line ends; returns its tokens.
        Beyond corpus_tokens the file's start is dropped (oldest first)."""
        text = read_corpus(path)
        total = 0
        for piece in _pieces(text, CORPUS_CHUNK_CHARS):
            tokens = tokenize(piece)
            total += len(tokens)
            self.corpus.add_document(tokens, "corpus")
            self.documents_added += 1
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
            proposal, at, renamed, shared = shadow.proposal, shadow.at, shadow.renamed, not shadow.renamed_copy
            for i in range(shadow.judged, min(len(proposal.tokens), len(committed) - at)):
                hit = committed[at + i] == proposal.tokens[i]
                self._learn(seq, proposal.raw_confidence[i], hit, draft_group(proposal.match_length, i, proposal.own), shared)
                if renamed and i in renamed:
                    self._renames(seq).judged(renamed[i], hit)
                if not hit:
                    self._renames(seq).broke(at + i, proposal.tokens[i:])
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

    def _learn(self, seq: int, raw: float, odds: float, group: int, shared: bool = True) -> None:
        """One judged token of this slot's text (1/0, or the odds it was accepted with): the shared
        calibration and the text's own record learn it alike, but for a copy its renames helped
        (`shared` False): that is this text's own fact, and the calibration is what every text's
        copies start from. Fed the renamed copies' hits, it sent 8-token drafts at 0.88 odds into the
        prose prompts after the rename prompts, which broke at once (bench/prompts_unseen2.jsonl on 2
        cores: french 0.97x -> 0.90x in three runs of three); kept out, no recorded set lost more than
        0.1 % replayed (bench/measured/vm-20261127-r4-policy-replay-renames.md, -renames-ab)."""
        if shared:
            self.calibrator.update(raw, odds, group)
        self._text(seq).observe(group, odds)

    def _judge_renames(self, seq: int, shadow: _Shadow, positions: range, accepted: int) -> None:
        """The verifier judged these of a sent draft's tokens (the first `accepted` right): the
        renames that wrote any of them learn it."""
        for i in positions:
            if i in shadow.renamed:
                self._renames(seq).judged(shadow.renamed[i], i < accepted)

    def _renames(self, seq: int) -> Renames:
        renames = self.renames.get(seq)
        if renames is None:
            renames = self.renames[seq] = Renames()
        return renames

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
    renamed: dict[int, tuple[int, ...]] = field(default_factory=dict)  # position -> the old name whose rename wrote it
    renamed_copy: bool = False  # found or written through the text's renames


def _pieces(text: str, size: int):
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            cut = text.rfind("\n", start, end)
            end = cut + 1 if cut > start else end
        yield text[start:end]
        start = end
