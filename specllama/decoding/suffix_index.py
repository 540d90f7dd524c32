"""An index over token documents that answers: where did the end of this context occur before, as
long a match as possible, and what followed it how often? The core of the suffix drafter.

Design: hash chains over several window lengths (the LZ77/zlib match finder), not a suffix tree.
For each level n in LEVELS = (1, 2, 4, 8, 16, 32) a head table maps the hash of a window of n
tokens to the latest position where such a window ended, and prev[p] links to the position before
it with the same bucket, so each chain lists occurrences newest first. Why this and not a suffix
automaton or a depth-64 suffix trie:
  - memory is a few machine words per token in numpy arrays (a Python trie costs a dict per node,
    up to 64 nodes per token: gigabytes for a 1 MB corpus); see the memory bound below;
  - appending is O(new tokens x levels) and bulk documents are indexed with vectorised numpy;
  - truncating the live document is an exact undo (prev[p] is the head that p displaced), which an
    automaton cannot do, and dropping the oldest documents is moving a start mark (chains are
    newest first, so a walk stops there) plus an amortised compaction;
  - a query is exact: every occurrence of the context's last n tokens is on the level-n chain, so
    the highest level with a true occurrence bounds the longest match from below, and comparing
    those candidates backwards (vectorised, up to max_match tokens) gives its exact length and the
    exact set of occurrences of the matched context. Hash collisions only add candidates that the
    comparison rejects; correctness never rests on the hash.
Lookup costs O(levels + chain length x max_match / vector width + draft length x occurrences); the
chain walk is capped at `max_candidates` (the newest ones, which are the best drafts anyway; None
makes it exact for the brute-force tests).

Documents are separated by a negative sentinel, unique per document, so no match or continuation
crosses a boundary. The last document is the live one (the current prompt + output): it grows by
`append` and shrinks by `truncate_live`; earlier ones are frozen.

Memory bound: the retained tokens (documents kept, separators included) stay <= token_budget,
oldest documents dropped first; only the live document is never dropped, so the bound is
max(token_budget, live). Stored positions stay <= retained + max(retained, COMPACT_MIN) (dead
space is compacted away once it exceeds both), and each stored position costs at most
MAX_BYTES_PER_POSITION = 176 bytes (token, prefix hash, a prev link per level, head tables at load
<= 1, all arrays at most twice their fill). Default budget 2^19 tokens (a 1 MB corpus is about
360k): < 0.2 GB worst case; measured 44 MiB holding that corpus.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

LEVELS = (1, 2, 4, 8, 16, 32)
MASK64 = (1 << 64) - 1
BASE = 0x9E3779B97F4A7C15  # odd, so invertible mod 2^64 (the bulk prefix hash divides by it)
BASE_INV = pow(BASE, -1, 1 << 64)
OFFSET = 0x2545F4914F6CDD1D  # keeps token 0 from hashing like nothing
MAX_BYTES_PER_POSITION = 2 * (8 + 8 + 4 * 6 + 2 * 4 * 6)  # capacity < 2x positions
COMPACT_MIN = 1 << 14  # below this much dead space compaction is not worth a rebuild
SCALAR_APPEND = 8  # appends this short are hashed and linked in Python integers (see _append_scalar)
SCALAR_CANDIDATES = 8  # a lookup's candidates up to this many are compared in Python integers (see _compare_few)
U64 = np.uint64
LEVEL_POWERS = {level: pow(BASE, level, 1 << 64) for level in LEVELS}  # BASE^n: a window's hash is P[p] - P[p-n] B^n


@dataclass
class Document:
    doc_id: int
    kind: str  # "live", "turn", "job", "corpus"
    start: int  # position of its first token
    end: int  # one past its last token; the separator sits at `end`


@dataclass
class Match:
    """The longest earlier match of a context and the most frequent path after it."""
    length: int  # tokens of the context matched (0: nothing found)
    occurrences: int  # how often the matched context occurred with a continuation
    tokens: list[int] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)  # occurrences that continued with tokens[i]...
    totals: list[int] = field(default_factory=list)  # ...out of the occurrences still on the path
    at: int = -1  # where the newest occurrence that took the whole path continues (an index position)

    @property
    def ratios(self) -> list[float]:
        """count(continuation) / count(context) at each step."""
        return [c / t for c, t in zip(self.counts, self.totals)]


@dataclass(frozen=True)
class ContextKey:
    """What a lookup needs of its context, worked out once for every index asked (the live text's,
    the history's, the corpus's): its last max_match tokens newest first, and the hash of its last n
    tokens for each n in LEVELS up to that many (a key serves lookups up to len(ctx_rev) tokens)."""
    hashes: dict[int, int]
    ctx_rev: np.ndarray

    @staticmethod
    def of(context: Sequence[int], max_match: int) -> "ContextKey":
        tail = [int(t) for t in context[-max(max(LEVELS), max_match):]][::-1]  # newest first
        hashes, h, power = {}, 0, 1
        for i, t in enumerate(tail[:max(LEVELS)], 1):
            h = (h + (t + OFFSET) * power) & MASK64
            power = (power * BASE) & MASK64
            if i in LEVELS:
                hashes[i] = h
        return ContextKey(hashes, np.asarray(tail[:max_match], dtype=np.int64))


class SuffixIndex:
    def __init__(self, token_budget: int = 1 << 19, max_match: int = 64,
                 max_candidates: int | None = 512):
        self.token_budget = token_budget
        self.max_match = max_match
        self.max_candidates = max_candidates
        self._next_id = 0
        self._clear_arrays()

    # ---- state -------------------------------------------------------------------------------
    def _clear_arrays(self, capacity: int = 1024) -> None:
        self._tok = np.zeros(capacity, dtype=np.int64)
        self._prefix = np.zeros(capacity + 1, dtype=U64)  # _prefix[i] = hash of _tok[:i]
        self._prev = [np.full(capacity + 1, -1, dtype=np.int32) for _ in LEVELS]
        self._table_bits = max(10, (capacity + 1).bit_length())
        self._heads = [np.full(1 << self._table_bits, -1, dtype=np.int32) for _ in LEVELS]
        self._n = 0  # positions in use
        self._start = 0  # first retained position: everything before belongs to dropped documents
        self._docs: deque[Document] = deque()  # frozen documents, oldest first
        self._live_start = 0
        self._live: list[int] = []  # the live document's tokens, for cheap comparisons
        self._pow = _powers(BASE, capacity + 1)
        self._inv_pow = _powers(BASE_INV, capacity + 1)

    def clear(self) -> None:
        self._clear_arrays()

    @property
    def live_tokens(self) -> list[int]:
        return self._live

    @property
    def documents(self) -> list[Document]:
        """Frozen documents oldest first, then the live one."""
        live = Document(-1, "live", self._live_start, self._n)
        return list(self._docs) + [live]

    @property
    def retained_tokens(self) -> int:
        return self._n - self._start

    @property
    def stored_positions(self) -> int:
        return self._n

    def nbytes(self) -> int:
        arrays = [self._tok, self._prefix, *self._prev, *self._heads]
        return sum(a.nbytes for a in arrays)

    # ---- building ----------------------------------------------------------------------------
    def _ensure_capacity(self, n: int) -> None:
        if n <= len(self._tok) and n + 1 <= (1 << self._table_bits):
            return
        capacity = len(self._tok)
        while capacity < n:
            capacity *= 2
        tok = np.zeros(capacity, dtype=np.int64)
        tok[:self._n] = self._tok[:self._n]
        self._rebuild(tok, capacity)

    def _rebuild(self, tok: np.ndarray, capacity: int) -> None:
        """Fresh tables for tok[:self._n] (vectorised): after growth or compaction."""
        self._tok = tok
        self._prefix = np.zeros(capacity + 1, dtype=U64)
        self._prev = [np.full(capacity + 1, -1, dtype=np.int32) for _ in LEVELS]
        self._table_bits = max(10, (capacity + 1).bit_length())  # load <= 1: collisions only lengthen chains
        self._heads = [np.full(1 << self._table_bits, -1, dtype=np.int32) for _ in LEVELS]
        if len(self._pow) < capacity + 1:
            self._pow = _powers(BASE, capacity + 1)
            self._inv_pow = _powers(BASE_INV, capacity + 1)
        # Separators are not indexed (see _append_raw), so rebuild document by document.
        self._hash_range(0, self._n)
        for doc in self._docs:
            self._link_range(doc.start, doc.end)
        self._link_range(self._live_start, self._n)

    def _hash_range(self, a: int, b: int) -> None:
        """_prefix[a+1 .. b] from _tok[a:b]: P[a+j] = B^j (P[a] + sum_{i<j} (t_i+OFF) B^-(i+1))."""
        if b <= a:
            return
        j = np.arange(1, b - a + 1)
        vals = self._tok[a:b].astype(U64) + U64(OFFSET)
        acc = np.cumsum(vals * self._inv_pow[j], dtype=U64) + self._prefix[a]
        self._prefix[a + 1:b + 1] = acc * self._pow[j]

    def _window_hash(self, ps: np.ndarray, level: int) -> np.ndarray:
        return self._prefix[ps] - self._prefix[ps - level] * self._pow[level]

    def _windows(self, a: int, b: int):
        """Per level: the window end positions a+1 .. b that exist at that level, and their buckets."""
        mask = U64((1 << self._table_bits) - 1)
        for li, level in enumerate(LEVELS):
            lo = max(a + 1, level)
            if b < lo:
                continue
            ps = np.arange(lo, b + 1, dtype=np.int64)
            yield li, ps, (self._window_hash(ps, level) & mask).astype(np.int64)

    def _link_range(self, a: int, b: int) -> None:
        """Chain the windows ending at positions a+1 .. b (the tokens _tok[a:b] were appended)."""
        for li, ps, buckets in self._windows(a, b):
            head, prev = self._heads[li], self._prev[li]
            if len(ps) == 1:
                p, bk = int(ps[0]), int(buckets[0])
                prev[p] = head[bk]
                head[bk] = p
                continue
            order = np.argsort(buckets, kind="stable")  # by bucket, then position
            sb, sp = buckets[order], ps[order]
            first = np.ones(len(sb), dtype=bool)
            first[1:] = sb[1:] != sb[:-1]
            links = np.empty(len(sp), dtype=np.int64)
            links[1:] = sp[:-1]
            links[first] = head[sb[first]]
            prev[sp] = links
            last = np.ones(len(sb), dtype=bool)
            last[:-1] = sb[1:] != sb[:-1]
            head[sb[last]] = sp[last]

    def _unlink_range(self, a: int, b: int) -> None:
        """Undo _link_range(a, b) exactly: per bucket, the head becomes what the earliest removed
        position displaced."""
        for li, ps, buckets in self._windows(a, b):
            order = np.argsort(buckets, kind="stable")
            sb, sp = buckets[order], ps[order]
            first = np.ones(len(sb), dtype=bool)
            first[1:] = sb[1:] != sb[:-1]
            self._heads[li][sb[first]] = self._prev[li][sp[first]]

    def _append_raw(self, tokens: np.ndarray | list[int], link: bool = True) -> None:
        a = self._n
        b = a + len(tokens)
        self._ensure_capacity(b)
        self._tok[a:b] = tokens
        self._n = b
        if b - a <= SCALAR_APPEND:
            self._append_scalar(a, b, link)
            return
        self._hash_range(a, b)
        if link:
            self._link_range(a, b)

    def _append_scalar(self, a: int, b: int, link: bool) -> None:
        """_hash_range and _link_range for a few tokens, in Python integers: what a generation step
        appends (one token, or an accepted draft's few). The vectorised path's ~40 numpy calls on
        arrays of one element cost ~60 us a step, about 3 % of a 2 ms GPU step (issue 42's device run)."""
        prefix, mask = self._prefix, (1 << self._table_bits) - 1
        # The prefix hashes the windows start at, read once as Python integers (numpy's scalar reads
        # cost ~0.1 us each warm, several times that after a decode has emptied the caches).
        lo = max(0, a + 1 - max(LEVELS))
        hashes = prefix[lo:a + 1].tolist()
        for t in self._tok[a:b].tolist():
            h = (hashes[-1] * BASE + t + OFFSET) & MASK64  # P[p] = B P[p-1] + (t + OFF), as _hash_range
            hashes.append(h)
        prefix[a + 1:b + 1] = hashes[len(hashes) - (b - a):]
        if not link:
            return
        for p in range(a + 1, b + 1):
            h = hashes[p - lo]
            for li, level in enumerate(LEVELS):
                if p < level:
                    break
                bucket = ((h - hashes[p - lo - level] * LEVEL_POWERS[level]) & MASK64) & mask
                head = self._heads[li]
                self._prev[li][p] = head[bucket]
                head[bucket] = p

    # ---- documents ---------------------------------------------------------------------------
    def append(self, tokens: Sequence[int]) -> None:
        """Extend the live document: O(len(tokens) x levels)."""
        if len(tokens) == 0:
            return
        if len(tokens) <= SCALAR_APPEND and isinstance(tokens, list):
            # A generation step's one token or few: no array made of them (np.asarray, its min and
            # tolist were a fifth of sync_live's time a step); _append_raw writes a list as well.
            arr = [int(t) for t in tokens]
            if min(arr) < 0:
                raise ValueError("token ids must be >= 0")
        else:
            arr = _as_tokens(tokens)
        self._append_raw(arr)
        self._live.extend(arr if isinstance(arr, list) else arr.tolist())
        self._enforce_budget()

    def live_offset(self, position: int) -> int:
        """Where an index position lies in the live document (its token's index there), or -1 when it
        lies in an earlier document."""
        return position - self._live_start if position >= self._live_start else -1

    def truncate_live(self, length: int) -> None:
        """Cut the live document back to its first `length` tokens: O(removed tokens x levels)."""
        length = max(0, length)
        if length >= len(self._live):
            return
        cut = self._live_start + length
        self._unlink_range(cut, self._n)
        self._n = cut
        del self._live[length:]

    def sync_live(self, tokens: Sequence[int]) -> None:
        """Make the live document equal `tokens`: keep the common prefix, replace the rest. Within a
        generation this is an append of the new tokens (list equality runs in C)."""
        tokens = tokens if isinstance(tokens, list) else list(tokens)
        live = self._live
        m = len(live)
        if len(tokens) >= m and tokens[:m] == live:
            self.append(tokens[m:])
            return
        common = 0
        for x, y in zip(live, tokens):
            if x != y:
                break
            common += 1
        self.truncate_live(common)
        self.append(tokens[common:])

    def freeze_live(self, kind: str = "turn") -> None:
        """The live document becomes an earlier document; a new, empty live document starts."""
        if not self._live:
            return
        self._docs.append(Document(self._new_id(), kind, self._live_start, self._n))
        self._append_raw(np.array([-1 - self._docs[-1].doc_id], dtype=np.int64), link=False)
        self._live_start = self._n
        self._live = []
        self._enforce_budget()

    def add_document(self, tokens: Sequence[int], kind: str = "job") -> None:
        """A finished document (an earlier turn, an earlier prompt/output of a batch, a corpus).
        Goes before the live document, which is re-indexed after it (O(live))."""
        if len(tokens) == 0:
            return
        live = self._live
        self.truncate_live(0)
        self._live = []
        self._append_raw(_as_tokens(tokens))
        doc = Document(self._new_id(), kind, self._live_start, self._n)
        self._docs.append(doc)
        self._append_raw(np.array([-1 - doc.doc_id], dtype=np.int64), link=False)
        self._live_start = self._n
        self._enforce_budget()
        self.append(live)

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _enforce_budget(self) -> None:
        while self._docs and self._n - self._start > self.token_budget:
            self._docs.popleft()
            self._start = self._docs[0].start if self._docs else self._live_start
        dead = self._start
        if dead > COMPACT_MIN and dead > self._n - self._start:
            self._compact()

    def _compact(self) -> None:
        """Drop the dead prefix: shift everything left by _start and rebuild (vectorised)."""
        shift = self._start
        keep = self._tok[shift:self._n].copy()
        for doc in self._docs:
            doc.start -= shift
            doc.end -= shift
        self._live_start -= shift
        self._n -= shift
        self._start = 0
        capacity = max(1024, 1 << (self._n.bit_length()))
        tok = np.zeros(capacity, dtype=np.int64)
        tok[:self._n] = keep
        self._rebuild(tok, capacity)

    # ---- query -------------------------------------------------------------------------------
    def live_key(self, max_match: int) -> ContextKey:
        """The live text's ContextKey for matches of at most max_match tokens (its windows up to that
        length), read off the tables: the prefix hashes already give every window's hash, so nothing
        is hashed again (a step's lookups, ~20 us less)."""
        n, m = self._n, len(self._live)
        span = min(m, max_match)
        ends = self._prefix[n - span:n + 1].tolist()  # one read: numpy's scalar reads are slow in a loop
        last, hashes = ends[-1], {}
        for level in LEVELS:
            if level > span:
                break
            hashes[level] = (last - ends[-1 - level] * LEVEL_POWERS[level]) & MASK64
        return ContextKey(hashes, self._tok[n - span:n][::-1].copy())

    def longest_match(self, context: Sequence[int], key: ContextKey | None = None,
                      limit: int | None = None) -> tuple[int, np.ndarray]:
        """(L, positions): the longest L <= max_match such that context[-L:] occurred earlier with
        a continuation, and the positions p right after each such occurrence, newest first. `key`:
        the context's ContextKey when the caller asks several indexes about the same context.
        `limit`: a length no match can exceed (the caller knows it, SuffixDrafter._reach): longer
        windows are not probed, and a match found is compared over at most that many tokens."""
        m = len(context)
        if m == 0 or self._n == 0:
            return 0, np.empty(0, dtype=np.int64)
        depth = min(self.max_match, m) if limit is None else min(self.max_match, m, max(limit, 1))
        if key is None or len(key.ctx_rev) < depth:
            key = ContextKey.of(context, self.max_match)
        hashes, ctx_rev = key.hashes, key.ctx_rev[:depth]
        mask = (1 << self._table_bits) - 1
        cap = self.max_candidates
        ctx = None  # ctx_rev as a list, made when the first few candidates are compared (_compare_few)
        for li in range(len(LEVELS) - 1, -1, -1):
            level = LEVELS[li]
            if level > depth:
                continue
            h = hashes[level]
            p = int(self._heads[li][h & mask])
            prev = self._prev[li]
            lowest = self._start + level
            found = []
            while p >= lowest:
                if p < self._n and self._tok[p] >= 0:  # has a continuation
                    found.append(p)
                    if cap is not None and len(found) >= cap:
                        break
                nxt = int(prev[p])
                if nxt >= p:  # chains only go back in time; anything else would be a broken table
                    break
                p = nxt
            if not found:
                continue
            if len(found) <= SCALAR_CANDIDATES:
                if ctx is None:
                    ctx = ctx_rev.tolist()
                best, kept = self._compare_few(found, ctx)
                if best < level:  # only bucket collisions
                    continue
                return best, np.array(kept, dtype=np.int64)
            ps = np.asarray(found, dtype=np.int64)
            ps = ps[self._window_hash(ps, level) == U64(h)]
            if len(ps) == 0:
                continue
            lengths = self._match_lengths(ps, ctx_rev)
            best = int(lengths.max())
            if best < level:  # only bucket collisions
                continue
            return best, ps[lengths >= best]
        return 0, np.empty(0, dtype=np.int64)

    def _compare_few(self, found: list[int], ctx: list[int]) -> tuple[int, list[int]]:
        """The vectorised comparison below for a few candidates, in Python integers: (the longest match
        length, the candidates of that length, newest first). No hash check first: a bucket collision's
        window differs from the context's, so it matches fewer than `level` tokens and the caller's
        `best < level` drops it, as the vectorised path's hash filter would. Why: the vectorised pair is
        ~15 numpy calls on arrays of a few elements, ~15 us a lookup where the decode leaves the caches
        warm (a GPU step is ~2 ms), while a step's lookup usually finds one to four candidates."""
        tok, start, depth = self._tok, self._start, len(ctx)
        best, kept = -1, []
        for p in found:
            window = tok[max(start, p - depth):p].tolist()
            n, at = 0, len(window) - 1  # compared backwards from p - 1, as ctx is newest first
            while n < depth and at >= 0 and window[at] == ctx[n]:
                n += 1
                at -= 1
            if n > best:
                best, kept = n, [p]
            elif n == best:
                kept.append(p)
        return best, kept

    def _match_lengths(self, ps: np.ndarray, ctx_rev: np.ndarray) -> np.ndarray:
        depth = len(ctx_rev)
        idx = ps[:, None] - 1 - np.arange(depth)[None, :]
        ok = idx >= self._start
        eq = (self._tok[np.maximum(idx, 0)] == ctx_rev[None, :]) & ok
        full = eq.all(axis=1)
        return np.where(full, depth, np.argmin(eq, axis=1))

    def query(self, context: Sequence[int], max_tokens: int, key: ContextKey | None = None) -> Match:
        """The longest match of the context's suffix, then the most frequent path after it: at each
        step the continuation most occurrences agree on (ties: the newest), keeping only the
        occurrences that took it."""
        return self.follow(*self.longest_match(context, key), max_tokens)

    def follow(self, length: int, ps: np.ndarray, max_tokens: int) -> Match:
        """query()'s second half: the path after a match of `length` tokens found at `ps`
        (longest_match's answer). Apart, so that a caller asking several indexes walks only the one
        whose match it takes, and none for a match too short to draft from. A lone occurrence's path
        that reaches the live text's end repeats on (_repeat_past_end)."""
        match = Match(length, len(ps))
        tok, n = self._tok, self._n
        j = 0
        while j < max_tokens and len(ps):
            if len(ps) == 1:
                # A lone occurrence (the usual case in a copy): the rest of its path in one slice, up to
                # its document's end. Token by token this loop cost ~0.6 ms of a step's ~0.8 ms
                # proposal for a 63-token draft (scripts/measure/policy_replay.py's texts, profiled).
                start = int(ps[0]) + j
                tail = tok[start:min(n, start + max_tokens - j)]
                ends = np.flatnonzero(tail < 0)
                tail = (tail[:ends[0]] if len(ends) else tail).tolist()
                match.tokens += tail
                if not len(ends) and start + len(tail) == n and length >= n - int(ps[0]):
                    _repeat_past_end(match.tokens, n - int(ps[0]), max_tokens)
                match.counts += [1] * (len(match.tokens) - len(match.counts))
                match.totals += [1] * (len(match.tokens) - len(match.totals))
                break
            # Several occurrences: the stretch where every one goes on alike, in one go...
            q = ps[:, None] + (j + np.arange(max_tokens - j))[None, :]
            ahead = tok[np.minimum(q, n - 1)]
            alike = ((q < n) & (ahead >= 0)).all(axis=0) & (ahead == ahead[0]).all(axis=0)
            same = len(alike) if alike.all() else int(np.argmin(alike))
            if same:
                match.tokens += ahead[0, :same].tolist()
                match.counts += [len(ps)] * same
                match.totals += [len(ps)] * same
                j += same
                continue
            # ... then where they part: the continuation most of them took, among those that go on.
            nxt, valid = ahead[:, 0], (q[:, 0] < n) & (ahead[:, 0] >= 0)
            if not valid.any():
                break
            total = len(ps)
            ps, nxt = ps[valid], nxt[valid]
            if (nxt == nxt[0]).all():  # they agree; only some ended here
                token, count = int(nxt[0]), len(nxt)
            else:
                values, first, counts = np.unique(nxt, return_index=True, return_counts=True)
                best = int(np.lexsort((first, -counts))[0])  # most counts, then newest (first in ps)
                token, count = int(values[best]), int(counts[best])
                ps = ps[nxt == token]
            match.tokens.append(token)
            match.counts.append(count)
            match.totals.append(total)
            j += 1
        if len(ps):
            match.at = int(ps[0])
        return match


def _repeat_past_end(tokens: list[int], period: int, max_tokens: int) -> None:
    """A path that ran into the live document's end goes on as the text it copies would: its
    occurrence lies `period` tokens back, so once the drafts reach the end they copy the drafts
    themselves (tokens[i] = tokens[i - period]), which is what the next lookup would find if they
    were accepted. Only where the match is at least a period long (follow checks): the text then
    already repeated itself once; a shorter match near a prompt's end would repeat its last line on
    one occurrence's word (the copy set's yaml prompt: 8 rows sent, the first one rejected).
    Why: a text in a loop (an emoji repeated, a separator line, a small model's greedy loop) matched
    its own last tokens and the copy ended at the live end, one draft token a step: the tuning set's
    emoji answer ran at 1.4-1.6x of plain where it now runs at 3.0-3.3x on 2 CPU cores, and on a GPU
    each such two-row batch among plain steps cost 2.6 plain steps (bench/measured/
    xeon-20261127-policy-replay-periodic.md, xeon-20261127-periodic-emoji.txt)."""
    if period <= 0:
        return
    while len(tokens) < max_tokens:
        tokens.append(tokens[len(tokens) - period])


def _powers(base: int, n: int) -> np.ndarray:
    out = np.empty(n, dtype=U64)
    out[0] = 1
    if n > 1:
        out[1:] = U64(base)
        out[:] = np.cumprod(out, dtype=U64)
    return out


def _as_tokens(tokens: Sequence[int]) -> np.ndarray:
    arr = np.asarray(tokens, dtype=np.int64).reshape(-1)
    if len(arr) and int(arr.min()) < 0:
        raise ValueError("token ids must be >= 0")
    return arr
