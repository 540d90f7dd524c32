"""A prompt cache that outlives the slot: a long prefix (an agent's system text and tools, ~20k
tokens, minutes to prefill on a CPU) is prefilled once per model, not once per slot it lands in.

The engine keeps each slot's cache and reuses a new prompt's common prefix with it (engine._admit).
This keeps more than the slots hold, as llama.cpp's sequence states (llama_state_seq_get_data):
  - in memory: when a prompt is about to overwrite a slot whose tokens are not kept yet (another
    prompt took the slot), a copy of that slot is kept first; bounded in bytes, least recently
    used out; an entry that a newer one extends is dropped (the newer serves every prompt it did);
  - on disk (prompt_cache_disk.py): an entry is also written when the folder has no copy of most
    of it, after a long prefill too, so that the next server, after a restart, starts from it.
A new prompt takes the entry sharing its longest prefix, when that beats the slot's own by at
least `min_tokens` (small prompts do not churn it): restored into the slot, the engine then keeps
the common prefix and prefills only the rest.

What can be restored depends on the cache (`Holder`): an attention cache's cells are per token, so
an entry serves any prompt sharing a prefix with it (its tail is cut off after the restore). A
recurrent or hybrid model's state, and a sliding-window cache (which keeps only the last window's
cells), are the state after the entry's LAST token: such an entry serves only prompts that start
with all of its tokens.

The draft model's sequence is kept beside the target's, in the same entry: its prefill is a third
of the target's or more on a CPU, so re-prefilling it would keep a warm start far from warm. It is
restored where its own tokens serve the prompt, else its slot is left to catch up as it does today.
An MTP context (llama/mtp.py) follows the target's decodes as they happen and cannot be given a
restored prefix: with one loaded, the cache stays off.
"""

from __future__ import annotations

import hashlib
import json
import struct
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from specllama.llama import rollback as rb
from specllama.llama.backend import C
from specllama.llama.context import DecodeContext
from specllama.runtime.prompt_cache_disk import DiskCache
from specllama.runtime.prompt_cache_file import Part

# The fewest tokens an entry must give a prompt to be restored (and a slot must hold to be kept in
# memory). Restoring is a copy of the sequence's cells (~5 MB for 200 tokens of the 1.5B), where
# each prompt token costs ~10 ms of prefill on 2 CPU cores: an agent's 200-token first turn, sent
# again after other conversations took the slot, was prefilled again in ~2 s (0.75-0.83x of
# llama-server plain on such requests, 0.92-1.04x since: bench/measured/vm-20261126-serve-plain-turns,
# -before), while llama-server's own RAM cache restored it (1 token evaluated). Until 2026-11-26 this was 256.
MIN_TOKENS = 32
DISK_MIN_TOKENS = 256  # ... and to be written to disk: a write competes with decoding for the cores,
# and the folder is for a restart, where what matters is a long prefix (an agent's system text)
DISK_NEW_SHARE = 8  # written to disk when the folder lacks at least 1/8 of it (and DISK_MIN_TOKENS): not every turn
MEMORY_SHARE = 0.25  # --cache-ram's default: this share of the memory free at start ...
RAM_DEFAULT_MAX = 8 << 30  # ... at most llama-server's default (--cache-ram 8192 MiB)
DISK_SHARE = 0.10  # --cache-disk's default: this share of the free disk ...
DISK_DEFAULT_MAX = 8 << 30  # ... at most 8 GiB
CLOSE_SECONDS = 5.0  # a stop waits this long for a write under way
MEMORY, DISK = "memory", "disk"


def _stderr(text: str) -> None:
    print("specllama: " + text, file=sys.stderr, flush=True)


class Holder:
    """One context whose sequences the cache copies (the target's, the draft model's)."""

    def __init__(self, ctx: DecodeContext):
        self.ctx = ctx
        swa = C.llama_model_n_swa(ctx.model._model) > 0
        # Cells per token, all of them kept: any prefix of an entry can be restored.
        self.partial = ctx.rollback_method == rb.CELLS and not swa
        # llama.cpp writes every stream of the cache (one per sequence unless unified), all but the
        # sequence's empty: restorable into a cache of other streams (another --parallel) by
        # rewriting those empty ones, for a plain attention cache, whose layout is that alone.
        self.plain = self.partial
        self.n_stream = 1 if ctx.unified or ctx.n_seq_max == 1 else ctx.n_seq_max

    def usable(self, tokens: np.ndarray, prompt: np.ndarray, limit: int) -> int:
        """How many of `prompt`'s first `limit` tokens an entry of `tokens` gives."""
        if self.partial:
            n = min(len(tokens), limit)
            differ = np.flatnonzero(tokens[:n] != prompt[:n])
            return int(differ[0]) if len(differ) else n
        if len(tokens) <= limit and np.array_equal(tokens, prompt[:len(tokens)]):
            return len(tokens)
        return 0

    def copy(self, seq: int) -> Part | None:
        tokens = np.asarray(self.ctx.held[seq], dtype=np.int32)
        data = self.ctx.sequence_state(seq)
        return Part(tokens, data, self.n_stream, seq) if data is not None else None

    def restore(self, seq: int, part: Part) -> bool:
        if len(part.tokens) > self.ctx.n_ctx:
            return False
        data = part.data
        if part.n_stream != self.n_stream:
            if not self.plain:
                return False
            data = relayout(data, part.seq, part.n_stream, self.n_stream, seq)
            if data is None:
                return False
        return self.ctx.set_sequence_state(seq, data, part.tokens.tolist())


def relayout(data: bytearray, seq: int, n_stream: int, to_stream: int, to_seq: int) -> bytearray | None:
    """A plain attention cache's sequence state, copied from a cache of `n_stream` streams, as a
    cache of `to_stream` streams writes it: llama.cpp's layout is magic, sequence id, stream count,
    then per stream its cell count and cells, every stream but the sequence's holding 0 cells
    (llama-kv-cache.cpp, state_write); restoring reads the one non-empty stream into the target
    sequence's. None when the copy is not laid out so."""
    head, tail = 12 + 4 * seq, 4 * (n_stream - 1 - seq)
    if len(data) < head + tail + 4 or struct.unpack_from("<I", data, 8)[0] != n_stream or any(data[12:head]) \
            or (tail and any(data[len(data) - tail:])):
        return None
    out = bytearray(data[:4]) + struct.pack("<iI", to_seq, to_stream) + bytes(4 * to_seq)
    out += memoryview(data)[head:len(data) - tail]
    return out + bytes(4 * (to_stream - 1 - to_seq))


@dataclass
class Entry:
    parts: dict[str, Part]  # "target", and "draft" when the draft model's sequence was kept

    @property
    def tokens(self) -> np.ndarray:
        return self.parts["target"].tokens

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.parts.values())


@dataclass
class Stats:
    hits: dict[str, int] = field(default_factory=lambda: {MEMORY: 0, DISK: 0})
    tokens: dict[str, int] = field(default_factory=lambda: {MEMORY: 0, DISK: 0})  # prompt tokens restored
    saved: int = 0  # entries copied out of a slot


def default_ram_bytes() -> int:
    from specllama.llama.kv_memory import available_memory

    free = available_memory()
    return RAM_DEFAULT_MAX if free is None else min(RAM_DEFAULT_MAX, int(free * MEMORY_SHARE))


def default_disk_bytes(folder: Path) -> int:
    import shutil

    probe = Path(folder)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return min(DISK_DEFAULT_MAX, int(shutil.disk_usage(probe).free * DISK_SHARE))
    except OSError:
        return 0


def model_identity(path: Path) -> dict:
    st = Path(path).stat()
    return {"name": Path(path).name, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


class PromptCache:
    def __init__(self, target: DecodeContext, draft: DecodeContext | None, *, ram_bytes: int,
                 disk_bytes: int = 0, folder: Path | None = None, min_tokens: int = MIN_TOKENS,
                 disk_min_tokens: int = DISK_MIN_TOKENS, log: Callable[[str], None] = _stderr):
        import llama_cpp

        self.target, self.draft = Holder(target), (Holder(draft) if draft is not None else None)
        self.ram_bytes = ram_bytes
        self.min_tokens = max(1, min_tokens)
        self.disk_min_tokens = max(1, disk_min_tokens)
        self.log = log
        self.entries: OrderedDict[str, Entry] = OrderedDict()  # least recently used first
        self.stats = Stats()
        self._lock = threading.Lock()  # entries and stats, read by /metrics from another thread
        self.draft_identity = model_identity(draft.model.path) if draft is not None else None
        # The V cache's layout follows flash attention (transposed without it): a state saved one way
        # is refused the other, so each keeps its own entries.
        identity = {"model": model_identity(target.model.path), "cache_type": "q8_0" if target.exact else "f16",
                    "llama_cpp": llama_cpp.__version__,
                    **({"flash_attn": fa} if (fa := getattr(target, "flash_attn", "auto")) != "auto" else {})}
        prefix = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
        self.disk = None
        if disk_bytes > 0 and folder:
            try:
                self.disk = DiskCache(folder, disk_bytes, identity, prefix, log)
            except OSError as e:  # a folder that cannot be made or read: memory only, said once
                log(f"prompt cache: {folder}: {e.strerror or e}; kept in memory only")
        # An MTP context cannot be handed a restored prefix (module doc): nothing is restored then.
        self.enabled = not target.observers and (ram_bytes > 0 or self.disk is not None)

    # --- the engine's two calls ----------------------------------------------------------------

    def admit(self, prompt: Sequence[int], seq: int) -> str:
        """Before slot `seq` is given `prompt`: keep what the slot holds if the prompt would lose it,
        and restore the cached entry sharing the longest prefix with the prompt when it gives at
        least min_tokens more than the slot. Returns where the slot's prefix now comes from
        (MEMORY, DISK) or "" (the slot's own). Never fails the request: a fault is logged, and the
        prompt is prefilled as without a cache."""
        if not self.enabled:
            return ""
        try:
            return self._admit(prompt, seq)
        except Exception as e:  # a bug here costs a prefill, never the answer
            self.log(f"prompt cache: {type(e).__name__}: {e}; prefilling without it")
            return ""

    def prefilled(self, seq: int) -> None:
        """After a prompt's prefill (the drafters' too): written to disk when the folder lacks
        most of it, so a restart finds it."""
        if not self.enabled or self.disk is None:
            return
        try:
            held = np.asarray(self.target.ctx.held[seq], dtype=np.int32)
            if len(held) >= self.disk_min_tokens and len(held) - self._covered(held, disk=True) >= self._disk_new(held):
                self._keep(seq, held)
        except Exception as e:
            self.log(f"prompt cache: {type(e).__name__}: {e}; not kept")

    # --- inside --------------------------------------------------------------------------------

    def _admit(self, prompt: Sequence[int], seq: int) -> str:
        ctx = self.target.ctx
        p = np.asarray(prompt, dtype=np.int32)
        limit = len(p) - 1  # the engine decodes the last token itself
        own = self.target.usable(np.asarray(ctx.held[seq], dtype=np.int32), p, limit)
        best, where, key = self._best(p, limit)
        hit = best >= self.min_tokens and best >= own + self.min_tokens
        entry = self._entry(where, key) if hit else None  # taken first: keeping the slot may push it out
        held = np.asarray(ctx.held[seq], dtype=np.int32)
        if len(held) - (0 if entry is not None else own) >= self.min_tokens:  # the prompt overwrites the slot
            self._keep(seq, held)
        if entry is None:
            return ""
        if not self.target.restore(seq, entry.parts["target"]):
            self.log(f"prompt cache: an entry of {len(entry.tokens):,} tokens could not be restored "
                     "(llama.cpp refused it); prefilling instead")
            self._discard(key)
            return ""
        draft = entry.parts.get("draft")
        if self.draft is not None and draft is not None and self.draft.usable(draft.tokens, p, limit) >= self.min_tokens:
            self.draft.restore(seq, draft)  # refused: its slot is empty, and catches up as always
        with self._lock:
            self.stats.hits[where] += 1
            self.stats.tokens[where] += best
        return where

    def _best(self, p: np.ndarray, limit: int) -> tuple[int, str, str]:
        """(tokens given, MEMORY or DISK, key) of the entry giving `p` the longest prefix."""
        best = (0, "", "")
        with self._lock:
            memory = [(key, e.tokens) for key, e in self.entries.items()]
        for key, tokens in memory:
            if (n := self.target.usable(tokens, p, limit)) > best[0]:
                best = (n, MEMORY, key)
        if self.disk is not None:
            for record in self.disk.snapshot():
                if record.ready and record.key not in self.entries and \
                        (n := self.target.usable(record.tokens, p, limit)) > best[0]:
                    best = (n, DISK, record.key)
        return best

    def _entry(self, where: str, key: str) -> Entry | None:
        if where == MEMORY:
            with self._lock:
                self.entries.move_to_end(key)
                return self.entries[key]
        loaded = self.disk.load(key)
        if loaded is None:
            return None
        parts, draft_identity = loaded
        if draft_identity != self.draft_identity:  # made beside another draft model: the target's part only
            parts.pop("draft", None)
        entry = Entry(parts)
        self._remember(key, entry)
        return entry

    def _discard(self, key: str) -> None:
        with self._lock:
            self.entries.pop(key, None)
        if self.disk is not None:
            self.disk.forget(key)

    def _covered(self, tokens: np.ndarray, disk: bool) -> int:
        """The most of `tokens` one entry already gives (in memory, or on disk)."""
        return self._covering(tokens, disk)[0]

    def _covering(self, tokens: np.ndarray, disk: bool) -> tuple[int, str]:
        if disk:
            candidates = [(r.key, r.tokens) for r in self.disk.snapshot()]
        else:
            with self._lock:
                candidates = [(key, e.tokens) for key, e in self.entries.items()]
        return max(((self.target.usable(t, tokens, len(tokens)), key) for key, t in candidates), default=(0, ""))

    def _disk_new(self, tokens: np.ndarray) -> int:
        return max(self.disk_min_tokens, len(tokens) // DISK_NEW_SHARE)

    def _keep(self, seq: int, held: np.ndarray) -> None:
        """Copy slot `seq` into memory and to disk where they lack it."""
        covered, key = self._covering(held, disk=False)
        in_memory = self.ram_bytes > 0 and len(held) - covered >= self.min_tokens
        if self.ram_bytes > 0 and not in_memory:
            with self._lock:
                self.entries.move_to_end(key)  # the slot held it: used now
        on_disk = self.disk is not None and len(held) - self._covered(held, disk=True) >= self._disk_new(held)
        if not (in_memory or on_disk):
            return
        target = self.target.copy(seq)
        if target is None:
            return
        parts = {"target": target}
        if self.draft is not None and self.draft.ctx.past(seq) >= self.min_tokens:
            if (draft := self.draft.copy(seq)) is not None:
                parts["draft"] = draft
        entry = Entry(parts)
        with self._lock:
            self.stats.saved += 1
        if in_memory:
            self._remember(self.disk.key_for(held) if self.disk else _key(held), entry)
        if on_disk:
            self.disk.put(held, parts, self.draft_identity if "draft" in parts else None)

    def _remember(self, key: str, entry: Entry) -> None:
        """Into memory: entries it extends leave (attention caches: it gives all they gave), then
        the least recently used until it fits."""
        if entry.nbytes > self.ram_bytes:
            return
        tokens = entry.tokens
        with self._lock:
            if self.target.partial:
                for old in [k for k, e in self.entries.items()
                            if len(e.tokens) <= len(tokens) and np.array_equal(e.tokens, tokens[:len(e.tokens)])]:
                    del self.entries[old]
            self.entries[key] = entry
            self.entries.move_to_end(key)
            while sum(e.nbytes for e in self.entries.values()) > self.ram_bytes:
                self.entries.popitem(last=False)

    # --- what `ps` shows ----------------------------------------------------------------------

    def report(self) -> dict:
        with self._lock:
            out = {"memory_entries": len(self.entries), "memory_bytes": sum(e.nbytes for e in self.entries.values()),
                   "memory_limit": self.ram_bytes, "hits": dict(self.stats.hits), "tokens": dict(self.stats.tokens),
                   "saved": self.stats.saved}
        entries, nbytes = self.disk.used() if self.disk is not None else (0, 0)
        out.update(disk_entries=entries, disk_bytes=nbytes, disk_limit=self.disk.limit if self.disk is not None else 0)
        return out

    def close(self) -> None:
        if self.disk is not None:
            self.disk.close(CLOSE_SECONDS)


def _key(tokens: np.ndarray) -> str:
    return hashlib.sha256(tokens.astype("<i4").tobytes()).hexdigest()[:24]
