"""A model's own multi-token-prediction (MTP, "nextn") layers as a draft context, over the same
GGUF as the target: llama.cpp's `draft-mtp` protocol (common/speculative.cpp,
common_speculative_impl_draft_mtp) through the bindings.

The MTP layer predicts the token after next from two inputs: a token, and the target's hidden
state at the position before it. So every target decode (prompt chunks, verifications, replays)
is handed over as it happens (`decoded`: the context calls it): each token goes into the MTP
context's own cache with the target's state of the position before it. Drafting then decodes the
last token with the target's last state, and each draft with the MTP layer's own state, once per
draft. Going back (`rolled_back`, `cleared`) cuts the MTP cache to the target's.

Chained heads: a GGUF with several MTP layers (`llama_model_n_layer_nextn` > 1) drafts position
i with head i, as llama.cpp's `chain_heads` mode does (speculative.cpp: `chain_heads = n_mtp_layers
> 1 && !is_mem_shared`, n_max capped at n_mtp_layers): every target decode is fed to each head
in turn (`llama_set_nextn_layer_offset`), and draft step i decodes the whole draft so far again at
head i, whose own layer holds no cells in the draft region. In the vendored llama.cpp only step35,
mimo2 and hy-v3 build more than one head; qwen35, qwen3next, glm4-moe, deepseek2/3.2/4 and others
assert `n_layer_nextn == 1` (e.g. src/models/qwen35.cpp: "QWEN35 MTP currently only supports a
single MTP block"). Gemma 4's shared-memory assistant heads (`is_mem_shared`) are another model
file, not handled here.

A state the target no longer holds (a rollback far past the last decodes) is taken as zeros: that
costs draft quality for one position, never correctness (drafts are verified).

Following costs an MTP decode beside every target decode, drafting or not. A sequence whose policy
finds the head not paying stops being followed (`follow(seq, False)`): its decodes then only keep
the target's states (a copy of a row each), and when the head is wanted again (`follow(seq, True)`,
or a draft asked for) the positions missed are fed in one batch first (`catch_up`). The states of
the last KEEP_STATES positions are kept; past those the head's own cache of the sequence is dropped
and starts again from the oldest state kept (llama.cpp takes any start position in an empty
sequence): a head that rejoins after a long pause attends to the last KEEP_STATES positions only,
where every MTP layer's input, the target's state, still carries the whole text.
"""

from __future__ import annotations

import ctypes
import time
from typing import Sequence

import numpy as np

from specllama.errors import SpecllamaError
from specllama.llama.backend import C, last_llama_error
from specllama.llama.context import DecodeContext

KEEP_STATES = 64  # target states kept per sequence, by position: what a rollback can come back to


def _ext():
    import llama_cpp.llama_cpp_ext as ext  # experimental bindings (llama-ext.h)

    return ext


class MtpContext:
    """The MTP draft context of a target DecodeContext whose model was loaded with its MTP layers."""

    def __init__(self, target: DecodeContext):
        self.target = target
        model = target.model
        self.n_embd = C.llama_model_n_embd_out(model._model)
        self.n_vocab = model.n_vocab
        params = C.llama_context_default_params()
        params.n_ctx = target.n_ctx * target.n_seq_max
        params.n_batch = params.n_ubatch = target.n_batch
        params.n_seq_max = target.n_seq_max
        params.n_threads, params.n_threads_batch = target.n_threads, target.n_threads_batch
        params.ctx_type = C.LLAMA_CONTEXT_TYPE_MTP
        self._ctx = C.llama_init_from_model(model._model, params)
        if not self._ctx:
            raise SpecllamaError(f"llama.cpp could not make an MTP context for {model.path.name}: {last_llama_error()}")
        self._memory = C.llama_get_memory(self._ctx)
        self._batch = C.llama_batch_ext_init(self._ctx)
        ext = _ext()
        self._state_ith = ext.llama_get_embeddings_nextn_ith
        ext.llama_set_embeddings_nextn(target._ctx, True, False)  # the target hands every position's state over
        ext.llama_set_embeddings_nextn(self._ctx, True, True)
        self.states: list[dict[int, np.ndarray]] = [{} for _ in range(target.n_seq_max)]
        self._zeros = np.zeros(self.n_embd, dtype=np.float32)
        self._rows: list[np.ndarray] = []
        self.heads = max(1, int(C.llama_model_n_layer_nextn(model._model)))
        self.chained = self.heads > 1
        # Chained heads: per sequence, the draft so far as (token, position, state) rows, re-decoded at each head.
        self._chain: dict[int, list[tuple[int, int, np.ndarray]]] = {}
        # Per sequence: the positions the head's own cache holds, [0, fed) (a catch-up may start it later).
        self.fed = [0] * target.n_seq_max
        self.paused: set[int] = set()  # sequences not followed now
        self.feed_rows = 0  # rows fed to the head (following and catching up), and their seconds
        self.feed_seconds = 0.0
        target.observers.append(self)

    def close(self) -> None:
        if getattr(self, "_batch", None):
            C.llama_batch_ext_free(self._batch)
            self._batch = None
        if getattr(self, "_ctx", None):
            C.llama_free(self._ctx)
            self._ctx = None

    def __del__(self) -> None:
        self.close()

    # --- what the target did ------------------------------------------------------------------

    def decoded(self, tokens: Sequence[int], positions: Sequence[int], seqs: Sequence[Sequence[int]]) -> None:
        """The target decoded these batch rows: each token enters the MTP cache beside the
        target's state of the position before it (sequences followed only); the rows' own states
        are kept for what follows."""
        rows = [np.ctypeslib.as_array(self._state_ith(self.target._ctx, i), shape=(self.n_embd,)).copy()
                for i in range(len(tokens))]
        inputs = []  # each token beside the state of the position before it, this batch's rows included
        caught: set[int] = set()
        for token, pos, ids, row in zip(tokens, positions, seqs, rows):
            seq = ids[0]
            if seq not in self.paused:
                if seq not in caught:  # what it missed while not followed goes in first
                    caught.add(seq)
                    self.catch_up(seq, pos)
                inputs.append((seq, token, pos, self.states[seq].get(pos - 1, self._zeros)))
            self.states[seq][pos] = row
        self._feed(inputs)
        for seq in {ids[0] for ids in seqs}:
            self._forget(seq, max(self.states[seq]) - KEEP_STATES)

    def follow(self, seq: int, on: bool) -> None:
        """Feed the head this sequence's decodes (on), or only keep their states (off: the head
        is not drafting for it; what it missed is fed when it is wanted again)."""
        if on:
            self.paused.discard(seq)
        else:
            self.paused.add(seq)

    def catch_up(self, seq: int, upto: int) -> None:
        """Feed the head the positions [fed, upto) the target decoded while it was not followed."""
        held = self.target.held[seq]
        if self.fed[seq] >= upto or len(held) < upto:  # (a verifier's scratch sequence holds no text)
            return
        start = self.fed[seq]
        oldest = min(self.states[seq], default=upto)  # the oldest target state kept
        if not (start - 1 >= oldest or start == oldest == 0):
            # The states before some of those positions are gone: the head's cache of this sequence
            # starts again after the oldest one kept.
            C.llama_memory_seq_rm(self._memory, seq, 0, -1)
            start = min(oldest + 1, upto)
        self._feed([(seq, held[p], p, self.states[seq].get(p - 1, self._zeros)) for p in range(start, upto)])
        self.fed[seq] = upto

    def _feed(self, inputs: list[tuple[int, int, int, np.ndarray]]) -> None:
        """Rows (seq, token, position, the target's state before it) into every head's cache."""
        if not inputs:
            return
        begin = time.perf_counter()
        first: dict[int, int] = {}
        for seq, _, pos, _ in inputs:
            first[seq] = min(first.get(seq, pos), pos)
        for head in range(self.heads):  # each head's own layer gets these cells (one pass unless chained)
            for seq, pos in first.items():
                C.llama_memory_seq_rm(self._memory, seq, pos, -1)
            self._head(head)
            for seq, token, pos, state in inputs:
                self._add(seq, token, pos, state, False)
            self._process()
        self._head(0)
        for seq, _, pos, _ in inputs:
            self.fed[seq] = max(self.fed[seq], pos + 1)
        self.feed_rows += len(inputs)
        self.feed_seconds += time.perf_counter() - begin

    def rolled_back(self, seq: int, n_past: int) -> None:
        C.llama_memory_seq_rm(self._memory, seq, n_past, -1)
        self.fed[seq] = min(self.fed[seq], n_past)
        self.states[seq] = {p: r for p, r in self.states[seq].items() if p < n_past}

    def cleared(self, seq: int | None) -> None:
        for s in range(len(self.states)) if seq is None else (seq,):
            self.rolled_back(s, 0)

    def _forget(self, seq: int, before: int) -> None:
        self.states[seq] = {p: r for p, r in self.states[seq].items() if p >= before}

    # --- drafting -----------------------------------------------------------------------------

    @property
    def max_depth(self) -> int | None:
        """The longest draft: one position a head when chained (llama.cpp caps n_max alike), else None."""
        return self.heads if self.chained else None

    def draft_step(self, items: Sequence[tuple[int, int, int, np.ndarray | None]]) -> list[tuple[np.ndarray, np.ndarray]]:
        """One MTP decode: (seq, token, position, state or None for the target's at position - 1)
        each, the first of a draft with state None; returns each one's logits row and the MTP
        layer's own state after it. Chained, the whole draft so far is decoded at head i (the
        i-th call since the draft began), logits for its last row."""
        last = []
        for seq, token, pos, state in items:
            if state is None:  # a draft's first position: the head must hold the text before it
                self.catch_up(seq, pos)
        for seq, token, pos, state in items:
            first = state is None  # a draft's first position: the target's state before it
            state = self.states[seq].get(pos - 1, self._zeros) if first else state
            if not self.chained:
                last.append(self._add(seq, token, pos, state, True))
                continue
            if first:
                self._chain[seq] = []
            self._chain[seq].append((token, pos, state))
        if self.chained:
            depth = {len(chain) for seq, *_ in items for chain in (self._chain[seq],)}
            if len(depth) != 1:
                raise SpecllamaError("chained MTP heads draft every sequence in lockstep")
            self._head(depth.pop() - 1)
            for seq, *_ in items:
                C.llama_memory_seq_rm(self._memory, seq, self._chain[seq][0][1], -1)
                rows = self._chain[seq]
                idx = [self._add(seq, token, pos, state, i == len(rows) - 1) for i, (token, pos, state) in enumerate(rows)]
                last.append(idx[-1])
        try:
            self._process()
        finally:
            self._head(0)
        out = []
        for i in last:
            logits = np.ctypeslib.as_array(C.llama_get_logits_ith(self._ctx, i), shape=(self.n_vocab,)).copy()
            out.append((logits, np.ctypeslib.as_array(self._state_ith(self._ctx, i), shape=(self.n_embd,)).copy()))
        return out

    def _head(self, head: int) -> None:
        if self.chained:
            _ext().llama_set_nextn_layer_offset(self._ctx, head)

    def drop_drafts(self, seq: int, pos0: int) -> None:
        """Forget the draft positions (the verification hands the real states over)."""
        C.llama_memory_seq_rm(self._memory, seq, pos0, -1)
        self._chain.pop(seq, None)

    # --- the batch ----------------------------------------------------------------------------

    def _add(self, seq: int, token: int, pos: int, state: np.ndarray, output: bool) -> int:
        idx = C.llama_batch_ext_add_token(self._batch, seq, token)
        if idx < 0:
            raise SpecllamaError(f"the MTP batch refused a token ({idx})")
        C.llama_batch_ext_set_pos(self._batch, idx, (C.llama_pos * 4)(pos, 0, 0, 0))
        row = np.ascontiguousarray(state, dtype=np.float32)
        self._rows.append(row)  # alive until processed
        embd = C.llama_embd(row.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), 1, self.n_embd)
        if not C.llama_batch_ext_set_embd_token(self._batch, idx, embd):
            raise SpecllamaError("the MTP batch refused a hidden state")
        C.llama_batch_ext_set_output_logits(self._batch, idx, output)
        return idx

    def _process(self) -> None:
        try:
            rc = C.llama_process(self._ctx, C.LLAMA_PROCESS_TYPE_DECODE, self._batch)
            if rc != 0:
                raise SpecllamaError(f"the MTP decode failed with code {rc}: {last_llama_error()}")
        finally:
            C.llama_batch_ext_clear(self._batch)
            self._rows = []
