"""llama.cpp's draft-mtp protocol written out plainly (common/speculative.cpp,
common_speculative_impl_draft_mtp, single head), straight on the bindings: the reference the MTP
drafter's drafts are checked against, and what scripts/measure/probe_mtp.py runs."""

from __future__ import annotations

import ctypes

import numpy as np

from specllama.llama.backend import C, ensure_backend


def _rows(ext, ctx, n: int, n_embd: int) -> np.ndarray:
    return np.stack([np.ctypeslib.as_array(ext.llama_get_embeddings_nextn_ith(ctx, i), shape=(n_embd,)).copy()
                     for i in range(n)])


def reference_drafts(path, prompt: list[int], k: int) -> tuple[int, list[int]]:
    """The target decodes `prompt` and picks its next token greedily; the MTP context is fed each
    prompt token with the target's state before it, then drafts k tokens greedily. Returns (the
    target's token, the drafts)."""
    import llama_cpp.llama_cpp_ext as ext

    ensure_backend()
    mparams = C.llama_model_default_params()
    mparams.load_mtp = True
    model = C.llama_model_load_from_file(str(path).encode(), mparams)
    n_embd, n_vocab = C.llama_model_n_embd_out(model), C.llama_vocab_n_tokens(C.llama_model_get_vocab(model))
    cparams = C.llama_context_default_params()
    cparams.n_ctx, cparams.n_batch, cparams.n_ubatch, cparams.n_threads, cparams.n_threads_batch = 512, 512, 512, 1, 1
    tgt = C.llama_init_from_model(model, cparams)
    cparams.ctx_type = C.LLAMA_CONTEXT_TYPE_MTP
    dft = C.llama_init_from_model(model, cparams)
    ext.llama_set_embeddings_nextn(tgt, True, False)
    ext.llama_set_embeddings_nextn(dft, True, True)
    keep = []

    def process(ctx, entries):  # (token, pos, state or None, output)
        batch = C.llama_batch_ext_init(ctx)
        for token, pos, state, output in entries:
            idx = C.llama_batch_ext_add_token(batch, 0, token)
            C.llama_batch_ext_set_pos(batch, idx, (C.llama_pos * 4)(pos, 0, 0, 0))
            if state is not None:
                row = np.ascontiguousarray(state, dtype=np.float32)
                keep.append(row)
                C.llama_batch_ext_set_embd_token(batch, idx, C.llama_embd(
                    row.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), 1, n_embd))
            C.llama_batch_ext_set_output_logits(batch, idx, output)
        assert C.llama_process(ctx, C.LLAMA_PROCESS_TYPE_DECODE, batch) == 0
        C.llama_batch_ext_free(batch)

    def logits(ctx, i):
        return np.ctypeslib.as_array(C.llama_get_logits_ith(ctx, i), shape=(n_vocab,))

    try:
        process(tgt, [(t, p, None, p == len(prompt) - 1) for p, t in enumerate(prompt)])
        h = _rows(ext, tgt, len(prompt), n_embd)
        last = int(np.argmax(logits(tgt, len(prompt) - 1)))
        process(dft, [(t, p, np.zeros(n_embd) if p == 0 else h[p - 1], False) for p, t in enumerate(prompt)])
        drafts, token, state, pos = [], last, h[-1], len(prompt)
        for _ in range(k):
            process(dft, [(token, pos, state, True)])
            token, pos = int(np.argmax(logits(dft, 0))), pos + 1
            state = np.ctypeslib.as_array(ext.llama_get_embeddings_nextn_ith(dft, 0), shape=(n_embd,)).copy()
            drafts.append(token)
        return last, drafts
    finally:
        C.llama_free(dft)
        C.llama_free(tgt)
        C.llama_model_free(model)
