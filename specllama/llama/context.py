"""One KV cache over a GGUFModel: batched decode with logits only where asked, checked rollback,
sequence copies.

We use the low-level batch API rather than `Llama` because `Llama(logits_all=True)` allocates
n_ctx x n_vocab floats (2.5 GB for Qwen at 4096).
"""

from __future__ import annotations

import ctypes
import math
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from specllama.errors import ContextOverflowError, ModelFileError, SpecllamaError
from specllama.llama import decode_threads, thread_share
from specllama.llama import rollback as rb
from specllama.llama.attention import flash_attention
from specllama.llama.backend import C, default_threads, last_llama_error
from specllama.llama.device_argmax import DeviceArgmax
from specllama.llama.model import GGUFModel


@dataclass
class _Batch:
    """A reusable llama_batch sized for the largest decode we submit."""

    capacity: int
    n_seq_max: int

    def __post_init__(self) -> None:
        self.raw = C.llama_batch_init(self.capacity, 0, self.n_seq_max)

    def fill(self, tokens: Sequence[int], positions: Sequence[int], seqs: Sequence[Sequence[int]],
             want_logits: Sequence[bool]) -> None:
        b = self.raw
        b.n_tokens = len(tokens)
        for i, (tok, pos, seq_ids, want) in enumerate(zip(tokens, positions, seqs, want_logits)):
            b.token[i] = tok
            b.pos[i] = pos
            b.n_seq_id[i] = len(seq_ids)
            for j, s in enumerate(seq_ids):
                b.seq_id[i][j] = s
            b.logits[i] = 1 if want else 0

    def free(self) -> None:
        if self.raw is not None:
            C.llama_batch_free(self.raw)
            self.raw = None


NONE, ROW, ARGMAX = 0, 1, 2  # what _submit returns for a position: nothing, its logits row, its argmax id


@dataclass(frozen=True)
class DecodePart:
    """One sequence's share of a multi-sequence decode: tokens appended to `seq`, and which of
    them return logits ("all", "last" or "none"), or "argmax": every position's argmax token id
    only (greedy verification needs no more: no row is copied out of llama.cpp's buffer)."""

    seq: int
    tokens: Sequence[int]
    logits: str = "all"


class DecodeContext:
    """One KV cache over a GGUFModel, holding up to n_seq_max sequences; `held[s]` mirrors what
    sequence s holds, position by position (`tokens` is sequence 0's: the single-sequence case).

    n_ctx is what ONE sequence can hold. With several sequences the cache is split per sequence
    (llama.cpp's kv_unified = False), so a sequence's attention reads only its own cells: measured
    by scripts/measure/kv_layout.py, see docs/batch-and-servers.md. `unified=True` shares one cache of n_ctx cells
    among all sequences instead: what stairs verification needs, since its sequences are copies
    of sequence 0 that share its cells.

    `rollback` always leaves a sequence holding exactly its first n tokens, whatever the
    architecture; how (and what it costs) is `rollback_method` (llama/rollback.py): recurrent and
    hybrid models keep `snapshot_depth` state snapshots where llama.cpp has them, and state
    checkpoints otherwise (`prepare_rollback` before a decode whose tail may be dropped,
    `checkpoint` after a prompt).
    """

    def __init__(self, model: GGUFModel, *, n_ctx: int = 4096, n_threads: int | None = None,
                 n_threads_batch: int | None = None, n_batch: int = 512, n_seq_max: int = 1, exact: bool = False,
                 unified: bool = False, snapshot_depth: int = rb.SNAPSHOT_DEPTH, flash_attn: str = "auto",
                 backend_argmax: bool = False):
        self.model = model
        threads = n_threads or default_threads()
        params = C.llama_context_default_params()
        cells = n_ctx if unified else n_ctx * n_seq_max
        # What --flash-attn means for this context (llama/attention.py: off on a CPU for deep contexts).
        self.flash_attn_asked = flash_attn
        self.flash_attn = flash_attention(flash_attn, exact=exact, offloaded=getattr(model, "n_gpu_layers", 0) != 0,
                                          n_ubatch=n_batch, n_ctx=cells, n_head=C.llama_model_n_head(model._model),
                                          n_ctx_seq=n_ctx)
        params.flash_attn_type = {"on": C.LLAMA_FLASH_ATTN_TYPE_ENABLED, "off": C.LLAMA_FLASH_ATTN_TYPE_DISABLED,
                                  "auto": C.LLAMA_FLASH_ATTN_TYPE_AUTO}[self.flash_attn]
        if exact:
            # Attention whose result for a query row does not depend on the batch: ggml's CPU flash
            # attention takes a vector path per row, in cache order, skipping masked cells, unless
            # the cache is F16/F32, where it tiles batches of rows and splits one row's cache over
            # threads (other summation orders). A Q8_0 cache keeps the vector path always.
            params.type_k = params.type_v = C.GGML_TYPE_Q8_0
        self.exact = exact
        params.n_ctx = cells
        params.n_batch = n_batch
        params.n_ubatch = n_batch
        params.n_seq_max = n_seq_max
        params.kv_unified = unified and n_seq_max > 1
        params.n_threads = threads
        params.n_threads_batch = n_threads_batch or threads
        # Recurrent-state snapshots for dropping a rejected draft in place (0 where the
        # architecture has none: llama.cpp clamps it, and nothing is allocated for attention-only models).
        params.n_rs_seq = snapshot_depth
        # Greedy rows' argmax on the backend (device_argmax.py): a verify batch has many outputs a
        # sequence, where llama.cpp's default lets a backend sampler see one. Not with a unified cache,
        # whose stairs verification reads rows.
        backend_argmax = backend_argmax and not params.kv_unified
        if backend_argmax:
            params.n_outputs_max_per_seq = 0  # = n_outputs_max
        self._ctx = C.llama_init_from_model(model._model, params)
        if not self._ctx:
            raise SpecllamaError(f"llama.cpp could not create a context of {n_ctx} tokens x {n_seq_max} "
                                 f"sequences for {model.path.name}: {last_llama_error()}")
        self._memory = C.llama_get_memory(self._ctx)
        self._device_argmax = DeviceArgmax(self._ctx) if backend_argmax else None
        self.n_ctx: int = C.llama_n_ctx_seq(self._ctx)
        # llama.cpp clamps n_batch to n_ctx and aborts the process on a larger batch: chunk by its value.
        self.n_batch: int = min(C.llama_n_batch(self._ctx), C.llama_n_ubatch(self._ctx))
        self.n_seq_max = n_seq_max
        self.unified = unified
        self.n_threads = threads
        self.n_threads_batch = n_threads_batch or threads
        self._threads_applied = (self.n_threads, self.n_threads_batch)  # what llama.cpp decodes with now
        self._batch = _Batch(self.n_batch, max(1, n_seq_max))
        self.held: list[list[int]] = [[] for _ in range(n_seq_max)]
        self.snapshot_depth: int = C.llama_n_rs_seq(self._ctx)
        self.rollback_method = rb.method_for(model._model, self.snapshot_depth)
        # Per sequence, the tokens its last decode appended: how far back its snapshots reach
        # (0 once used: llama.cpp's snapshot rollback is single-use until the next decode).
        self._fresh = [0] * n_seq_max
        self._checkpoints = rb.Checkpoints()
        # What dropping tails has cost: seconds, calls that dropped something, tokens decoded again.
        self.rollback_seconds = 0.0
        self.rollbacks = 0
        self.replayed_tokens = 0
        # Told of every decode, rollback and clear, as they happen: an MTP draft context (llama/mtp.py)
        # takes the target's hidden states from each decode and follows its cache back.
        self.observers: list = []
        # Seconds spent inside llama_decode itself: what a step costs beyond it (batch building,
        # fetching and checking logits, Python) is the rest, shown by --stats.
        self.llama_seconds = 0.0
        self.llama_calls = 0
        # Set from another thread when everything stops (a server's SIGTERM): a long decode (a
        # prompt's prefill, n_batch tokens at a time) ends after its current chunk, not after all.
        self.interrupted = False

    @property
    def tokens(self) -> list[int]:
        return self.held[0]

    @property
    def n_past(self) -> int:
        return len(self.held[0])

    def past(self, seq: int) -> int:
        return len(self.held[seq])

    def close(self) -> None:
        if getattr(self, "_batch", None):
            self._batch.free()
        if getattr(self, "_ctx", None):
            C.llama_free(self._ctx)
            self._ctx = None
            if getattr(self, "_device_argmax", None) is not None:
                self._device_argmax.close()

    def __del__(self) -> None:
        self.close()

    @property
    def backend_argmax(self) -> bool:
        """Whether greedy rows' argmax is taken on the backend, as it runs (never with a unified cache):
        part of the cost cache's key."""
        return getattr(self, "_device_argmax", None) is not None

    def set_threads(self, n_threads: int, n_threads_batch: int | None = None) -> None:
        self.n_threads, self.n_threads_batch = n_threads, n_threads_batch or n_threads
        self._apply_threads(self.n_threads, self.n_threads_batch)

    def _apply_threads(self, n: int, n_batch: int) -> None:
        if (n, n_batch) != self._threads_applied:
            C.llama_set_n_threads(self._ctx, n, n_batch)
            self._threads_applied = (n, n_batch)

    def _follow_machine(self) -> None:
        """Fewer threads than asked while other processes want the cores (llama/thread_share.py)."""
        share = thread_share.current()
        if share is not None:
            cap = share.cap()
            self._apply_threads(min(self.n_threads, cap), min(self.n_threads_batch, cap))

    # --- decoding -------------------------------------------------------------------------

    def decode(self, tokens: Sequence[int], logits: str | Sequence[int] = "last", seq: int = 0) -> np.ndarray:
        """Append tokens to one sequence. Returns copied logits, one row per requested position:
        logits = "last" | "all" | "none" | indices into `tokens`. Long inputs go in n_batch chunks."""
        n = len(tokens)
        if n == 0:
            return np.empty((0, self.model.n_vocab), dtype=np.float32)
        held = self.held[seq]
        self._check_room(seq, n)
        if logits == "last":
            wanted = {n - 1}
        elif logits == "all":
            wanted = set(range(n))
        elif logits == "none":
            wanted = set()
        else:
            wanted = set(logits)
        if wanted and self._device_argmax is not None:
            self._device_argmax.want(seq, False)  # rows are read: no argmax sampler on the way
        rows = []
        for start in range(0, n, self.n_batch):
            if start and self.interrupted:
                raise SpecllamaError(f"decoding stopped after {start} of {n} tokens: everything is stopping")
            chunk = tokens[start:start + self.n_batch]
            want = [start + i in wanted for i in range(len(chunk))]
            positions = range(len(held), len(held) + len(chunk))
            chunk_rows = self._submit(chunk, positions, [(seq,)] * len(chunk), want)
            if chunk_rows:
                rows.append(np.stack(chunk_rows))  # copied before the next chunk's decode reuses the buffer
            held.extend(chunk)
        if not rows:
            return np.empty((0, self.model.n_vocab), dtype=np.float32)
        return rows[0] if len(rows) == 1 else np.concatenate(rows)

    def decode_parts(self, parts: Sequence[DecodePart]) -> list[np.ndarray]:
        """Several sequences in ONE decode (what makes N prompts cost far less than N decodes):
        each part's tokens are appended to its sequence; returns each part's logits rows."""
        tokens, positions, seqs, want, counts = [], [], [], [], []
        for part in parts:
            n, held = len(part.tokens), self.held[part.seq]
            self._check_room(part.seq, n)
            tokens += part.tokens
            positions += range(len(held), len(held) + n)
            seqs += [(part.seq,)] * n
            kind = ARGMAX if part.logits == "argmax" else ROW
            rows = {"all": range(n), "argmax": range(n), "last": range(n - 1, n), "none": range(0)}[part.logits]
            want += [kind if i in rows else NONE for i in range(n)]
            counts.append(len(rows))
        if len(tokens) > self.n_batch:
            raise SpecllamaError(f"a batch of {len(tokens)} tokens exceeds n_batch {self.n_batch}")
        if self._device_argmax is not None:
            for part in parts:
                if part.logits != "none":
                    self._device_argmax.want(part.seq, part.logits == "argmax")
        rows = self._submit(tokens, positions, seqs, want) if tokens else []
        for part in parts:
            self.held[part.seq].extend(part.tokens)
        out, start = [], 0
        for part, count in zip(parts, counts):
            block = rows[start:start + count]
            if part.logits == "argmax":
                out.append(np.array(block, dtype=np.int64))
            else:
                out.append(np.stack(block) if block else np.empty((0, self.model.n_vocab), dtype=np.float32))
            start += count
        return out

    def decode_multi(self, tokens: Sequence[int], positions: Sequence[int], seqs: Sequence[Sequence[int]],
                     want_logits: Sequence[bool]) -> np.ndarray:
        """One raw batch over several sequences (for stairs verification); does not touch `held`."""
        if len(tokens) > self.n_batch:
            raise SpecllamaError(f"a multi-sequence batch of {len(tokens)} exceeds n_batch {self.n_batch}")
        if max(positions) >= self.n_ctx:
            raise ContextOverflowError(f"context full: position {max(positions)} >= n_ctx {self.n_ctx}")
        rows = self._submit(tokens, positions, seqs, want_logits)
        return np.stack(rows) if rows else np.empty((0, self.model.n_vocab), dtype=np.float32)

    def _check_room(self, seq: int, n: int) -> None:
        if len(self.held[seq]) + n > self.n_ctx:
            raise ContextOverflowError(
                f"context full: {len(self.held[seq])} tokens held + {n} new > n_ctx {self.n_ctx} "
                f"(raise --ctx, at most the model's {self.model.n_ctx_train})")

    def _submit(self, tokens, positions, seqs, want) -> list[np.ndarray]:
        """One llama_decode; per wanted position its logits row or argmax id. The rows are views of
        llama.cpp's logits buffer, valid until the next decode: callers stack them at once (one copy
        a row; a sampled step copied each 152k-float row twice)."""
        self._batch.fill(tokens, positions, seqs, want)
        self._follow_machine()
        decode_threads.noted()  # one decoding thread a process (llama/decode_threads.py)
        start = time.perf_counter()
        rc = C.llama_decode(self._ctx, self._batch.raw)
        self.llama_seconds += time.perf_counter() - start
        self.llama_calls += 1
        if rc == 1:
            raise ContextOverflowError(f"llama.cpp found no room in the KV cache (n_ctx {self.n_ctx})")
        if rc != 0:
            raise SpecllamaError(f"llama_decode failed with code {rc}: {last_llama_error()}")
        if self._device_argmax is not None:
            self._device_argmax.decoded()
        for observer in self.observers:
            observer.decoded(tokens, positions, seqs)
        if self.rollback_method != rb.CELLS:
            fresh = {}
            for ids in seqs:
                for s in ids:
                    fresh[s] = fresh.get(s, 0) + 1
            for s, n in fresh.items():
                self._fresh[s] = n
        n_vocab = self.model.n_vocab
        device = self._device_argmax
        rows = []
        for i, w in enumerate(want):
            if not w:
                continue
            if w == ARGMAX and device is not None and seqs[i][0] in device.attached:
                rows.append(device.token(i))  # taken on the backend: no row to copy or check
                continue
            view = np.ctypeslib.as_array(C.llama_get_logits_ith(self._ctx, i), shape=(n_vocab,))
            # A corrupt tensor gives NaN or inf logits, whose argmax is token 0: without this check
            # a damaged file "works" and prints "!!!!!!!!". A row's max is NaN if any logit is, and
            # +inf if any is (argmax stops at the first NaN, so its value is NaN too): one reduction
            # (~17 us a row on the 2-core machine) instead of isfinite's copy and scan (~30 us).
            if w == ARGMAX:
                best = int(np.argmax(view))
                peak = float(view[best])
            else:
                rows.append(view)  # not a copy: every caller stacks its rows before the next decode reuses the buffer
                peak = float(view.max())
            if not math.isfinite(peak):
                raise ModelFileError(f"{self.model.path} produced non-finite logits: the file is damaged "
                                     "(run `specllama models verify`, or fetch it again)")
            if w == ARGMAX:
                rows.append(best)
        return rows

    # --- cache surgery ----------------------------------------------------------------------

    def rollback(self, n_past: int, seq: int = 0) -> None:
        """Keep the first n_past tokens of a sequence, drop the rest: in place where the cache
        allows it, else from a state checkpoint (or the start) with the tokens between decoded again."""
        held = self.held[seq]
        if n_past > len(held):
            raise ValueError(f"cannot roll back to {n_past}: only {len(held)} tokens held")
        if n_past == len(held):
            return
        start = time.perf_counter()
        if self._drop_in_place(seq, n_past, len(held) - n_past):
            del held[n_past:]
            self._checkpoints.cut(seq, n_past)
            for observer in self.observers:
                observer.rolled_back(seq, n_past)
        else:
            self._rebuild(seq, n_past)
        self.rollback_seconds += time.perf_counter() - start
        self.rollbacks += 1

    def _drop_in_place(self, seq: int, n_past: int, drop: int) -> bool:
        if self.rollback_method == rb.CELLS or n_past == 0:
            self.remove(seq, n_past, -1)
            self._fresh[seq] = 0
            return True
        # Snapshots were written for the last decode's tokens but its first (the state before it
        # is not among them), and serve once.
        if self.rollback_method == rb.SNAPSHOTS and drop <= min(self.snapshot_depth, self._fresh[seq] - 1):
            if C.llama_memory_seq_rm(self._memory, seq, n_past, -1):
                self._fresh[seq] = 0
                return True
        return False

    def _rebuild(self, seq: int, n_past: int) -> None:
        """Back to the latest checkpoint at or before n_past (else to an empty sequence), then
        decode the tokens up to n_past again."""
        held = self.held[seq]
        replay = held[:n_past]
        checkpoint = self._checkpoints.best(seq, n_past)
        if checkpoint is not None and self._restore(seq, checkpoint):
            base = checkpoint.n_tokens
        else:
            self._checkpoints.clear(seq)
            self.remove(seq, 0, -1)
            base = 0
        del held[base:]
        self._checkpoints.cut(seq, base)
        self._fresh[seq] = 0
        for observer in self.observers:
            observer.rolled_back(seq, base)
        if n_past > base:
            self.decode(replay[base:], logits="none", seq=seq)
            self.replayed_tokens += n_past - base

    def _restore(self, seq: int, checkpoint: rb.Checkpoint) -> bool:
        data = checkpoint.data
        if C.llama_state_seq_set_data_ext(self._ctx, data, len(data), seq, rb.PARTIAL_ONLY) != len(data):
            return False
        # The recurrent state is the checkpoint's now; the attention cells after it are cut.
        return bool(C.llama_memory_seq_rm(self._memory, seq, checkpoint.n_tokens, -1))

    def checkpoint(self, seq: int = 0, *, keep: bool = True) -> None:
        """Copy the sequence's recurrent state as it is now, to come back to it later instead of
        decoding from the start (a conversation's next turn that changes the last one's tail).
        Nothing to do for an attention-only cache. `keep`: one of the few kept per sequence
        (after a prompt); else the current step's, replaced by the next."""
        if self.rollback_method == rb.CELLS:
            return
        size = C.llama_state_seq_get_size_ext(self._ctx, seq, rb.PARTIAL_ONLY)
        data = (ctypes.c_uint8 * size)()
        if not size or C.llama_state_seq_get_data_ext(self._ctx, data, size, seq, rb.PARTIAL_ONLY) != size:
            return  # no copy of this state: going back decodes from the start
        self._checkpoints.add(seq, rb.Checkpoint(len(self.held[seq]), data, keep))

    def sequence_state(self, seq: int) -> bytearray | None:
        """A copy of all the cache holds for `seq` (its cells, a recurrent state), in llama.cpp's own
        layout, to be put back by set_sequence_state (the prompt cache); None if it cannot be had."""
        size = C.llama_state_seq_get_size(self._ctx, seq)
        if not size:
            return None
        data = bytearray(size)
        if C.llama_state_seq_get_data(self._ctx, (ctypes.c_uint8 * size).from_buffer(data), size, seq) != size:
            return None
        return data

    def set_sequence_state(self, seq: int, data: bytearray, tokens: Sequence[int]) -> bool:
        """Make `seq` hold `tokens` from a sequence_state() copy of them. False (and `seq` empty)
        when llama.cpp refuses it (another layout or cache type, no room) or what it restored does
        not end where `tokens` does: the caller decodes instead, never runs on a half state."""
        self.clear(seq)
        buffer = (ctypes.c_uint8 * len(data)).from_buffer(data)
        if not C.llama_state_seq_set_data(self._ctx, buffer, len(data), seq) or \
                C.llama_memory_seq_pos_max(self._memory, seq) != len(tokens) - 1:
            self.clear(seq)
            return False
        self.held[seq][:] = tokens
        return True

    def prepare_rollback(self, seq: int, n_tokens: int) -> None:
        """The next decode appends to `seq` and up to n_tokens of it may be dropped (a draft's
        verification): a checkpoint now where the snapshots will not reach that far."""
        if self.rollback_method == rb.CHECKPOINTS or (
                self.rollback_method == rb.SNAPSHOTS and n_tokens > self.snapshot_depth):
            self.checkpoint(seq, keep=False)

    def remove(self, seq: int, p0: int, p1: int = -1) -> None:
        if not C.llama_memory_seq_rm(self._memory, seq, p0, p1):
            raise SpecllamaError(
                f"{self.model.path.name} ({self.model.info.architecture}) could not drop positions {p0}.. of "
                f"sequence {seq} from its cache (a {self.rollback_method} cache)")

    def copy_sequence(self, src: int, dst: int, p0: int = 0, p1: int = -1) -> None:
        C.llama_memory_seq_cp(self._memory, src, dst, p0, p1)

    def clear(self, seq: int | None = None) -> None:
        """Empty one sequence, or (None) the whole cache."""
        if seq is None:
            C.llama_memory_clear(self._memory, True)
            for held in self.held:
                held.clear()
            self._fresh = [0] * self.n_seq_max
        else:
            self.remove(seq, 0, -1)
            self.held[seq].clear()
            self._fresh[seq] = 0
        self._checkpoints.clear(seq)
        for observer in self.observers:
            observer.cleared(seq)

    # --- stairs verification: K+1 sequences side by side -------------------------------------

    def decode_stairs(self, last: int, draft: Sequence[int]) -> np.ndarray:
        """Sequence i (0..K) = sequence 0's cells + [last] + draft[:i], sharing the prefix by a
        copy (metadata only in a unified cache); one logits row per sequence, row i predicting the
        token after i drafts. Sequence 0's token list is untouched until commit_stairs."""
        k = len(draft)
        if k + 1 > self.n_seq_max:
            raise SpecllamaError(f"stairs verification of {k} drafts needs {k + 1} sequences; "
                                 f"the target context has {self.n_seq_max}")
        n_past = self.n_past
        for seq in range(1, k + 1):
            self.copy_sequence(0, seq, 0, n_past)
        tokens, positions, seqs, want = [], [], [], []
        for seq in range(k + 1):
            stair = [last, *draft[:seq]]
            tokens += stair
            positions += range(n_past, n_past + len(stair))
            seqs += [(seq,)] * len(stair)
            want += [False] * (len(stair) - 1) + [True]
        return self.decode_multi(tokens, positions, seqs, want)

    def commit_stairs(self, last: int, draft: Sequence[int], n_accepted: int) -> None:
        """Make sequence 0 hold prefix + [last] + accepted drafts, taken from the accepted stair's
        cells (nothing is decoded again), and drop the other stairs."""
        n_past = self.n_past
        if n_accepted > 0:
            self.remove(0, n_past, -1)
            self.copy_sequence(n_accepted, 0, n_past, n_past + 1 + n_accepted)
        for seq in range(1, len(draft) + 1):
            self.remove(seq, 0, -1)
        self.tokens.extend([last, *draft[:n_accepted]])

    def common_prefix(self, tokens: Sequence[int], seq: int = 0) -> int:
        """How many leading tokens the sequence holds in common with `tokens`. Asked every step by
        the model drafter: list comparisons run in C (a Python loop over a 4k-token context took
        ~0.5 ms a call, a quarter of a GPU's whole step), and the usual answer, "all it holds",
        takes one."""
        held, tokens = self.held[seq], list(tokens)
        n = min(len(held), len(tokens))
        if (held if n == len(held) else held[:n]) == (tokens if n == len(tokens) else tokens[:n]):
            return n
        lo, hi = 0, n - 1  # the first mismatch lies in [lo, hi]: bisect on prefix equality
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if held[:mid] == tokens[:mid]:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def reuse_prefix(self, tokens: Sequence[int], seq: int = 0) -> int:
        """Drop whatever follows the longest common prefix of the sequence and `tokens`; returns
        its length. Lets a chat decode only the new turn, not the whole history."""
        common = min(self.common_prefix(tokens, seq), len(tokens) - 1)  # always leave one token to decode
        self.rollback(max(common, 0), seq)
        return len(self.held[seq])


