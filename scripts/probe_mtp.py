"""Does llama-cpp-python 0.3.36 reach everything an MTP (multi-token prediction) drafter needs?
A probe, not a drafter: on a GGUF with nextn layers (tests/toy_models.py's qwen35 toy), it runs
llama.cpp's `draft-mtp` protocol (common/speculative.cpp, common_speculative_impl_draft_mtp, the
single-head qwen35 case) through the Python bindings alone and prints what each step gave:

1. the model loaded with `load_mtp`; a target context and an MTP context (`ctx_type =
   LLAMA_CONTEXT_TYPE_MTP`) over it; `llama_set_embeddings_nextn` on both (the target hands every
   position's hidden state over, the MTP context its drafted ones);
2. the prompt decoded by the target; the MTP context fed each token with the target's hidden state
   of the position before it (`llama_batch_ext_add_token` + `llama_batch_ext_set_embd_token`,
   `llama_process`);
3. drafting: the last token with the last hidden state, then each draft with the MTP context's
   own hidden state, K times; the drafts verified by one target decode.

    nice -n 19 python scripts/probe_mtp.py --tokenizer-from QWEN.gguf [--gguf MODEL.gguf] [-k 3]
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import llama_cpp.llama_cpp_ext as X  # noqa: E402

from specllama.llama.backend import C, ensure_backend  # noqa: E402


class Batch:
    """A llama_batch_ext of tokens, each optionally paired with a hidden-state row."""

    def __init__(self, ctx):
        self.raw = C.llama_batch_ext_init(ctx)
        self.rows: list[np.ndarray] = []  # kept alive until the batch is processed

    def add(self, token: int, pos: int, state: np.ndarray | None, output: bool) -> int:
        idx = C.llama_batch_ext_add_token(self.raw, 0, token)
        assert idx >= 0, f"llama_batch_ext_add_token: {idx}"
        p = (C.llama_pos * 4)(pos, 0, 0, 0)
        assert C.llama_batch_ext_set_pos(self.raw, idx, p)
        if state is not None:
            row = np.ascontiguousarray(state, dtype=np.float32)
            self.rows.append(row)
            embd = C.llama_embd(row.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), 1, row.size)
            assert C.llama_batch_ext_set_embd_token(self.raw, idx, embd), "set_embd_token refused"
        C.llama_batch_ext_set_output_logits(self.raw, idx, output)
        return idx

    def process(self, ctx) -> None:
        rc = C.llama_process(ctx, C.LLAMA_PROCESS_TYPE_DECODE, self.raw)
        assert rc == 0, f"llama_process: {rc}"
        C.llama_batch_ext_clear(self.raw)
        self.rows = []


def rows(ctx, n: int, n_embd: int) -> np.ndarray:
    return np.stack([np.ctypeslib.as_array(X.llama_get_embeddings_nextn_ith(ctx, i), shape=(n_embd,)).copy()
                     for i in range(n)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer-from", type=Path)
    parser.add_argument("--gguf", type=Path, help="a GGUF with nextn layers (default: the qwen35 toy, written now)")
    parser.add_argument("-k", type=int, default=3)
    args = parser.parse_args()
    ensure_backend()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.gguf
        if path is None:
            from tests.toy_models import write_toy_model
            path = write_toy_model(Path(tmp) / "qwen35.gguf", "qwen35", args.tokenizer_from)
        mparams = C.llama_model_default_params()
        mparams.load_mtp = True
        model = C.llama_model_load_from_file(str(path).encode(), mparams)
        print("nextn layers:", C.llama_model_n_layer_nextn(model))
        n_embd = C.llama_model_n_embd_out(model) if hasattr(C, "llama_model_n_embd_out") else C.llama_model_n_embd(model)
        vocab = C.llama_model_get_vocab(model)
        n_vocab = C.llama_vocab_n_tokens(vocab)

        cparams = C.llama_context_default_params()
        cparams.n_ctx, cparams.n_batch, cparams.n_ubatch, cparams.n_threads, cparams.n_threads_batch = 512, 64, 64, 1, 1
        tgt = C.llama_init_from_model(model, cparams)
        cparams.ctx_type = C.LLAMA_CONTEXT_TYPE_MTP
        dft = C.llama_init_from_model(model, cparams)
        assert tgt and dft, "a context could not be made"
        X.llama_set_embeddings_nextn(tgt, True, False)
        X.llama_set_embeddings_nextn(dft, True, True)

        prompt = [1000 + 37 * i % 5000 for i in range(20)]
        tb, db = Batch(tgt), Batch(dft)
        for pos, t in enumerate(prompt):
            tb.add(t, pos, None, pos == len(prompt) - 1)
        tb.process(tgt)
        h = rows(tgt, len(prompt), n_embd)
        print("target hidden states:", h.shape, "finite:", bool(np.isfinite(h).all()))
        last = int(np.argmax(np.ctypeslib.as_array(C.llama_get_logits_ith(tgt, len(prompt) - 1), shape=(n_vocab,))))
        # The MTP context sees token p with the target's state after p - 1 (zeros before the first).
        pending = np.zeros(n_embd, dtype=np.float32)
        for pos, t in enumerate(prompt):
            db.add(t, pos, pending if pos == 0 else h[pos - 1], False)
        db.process(dft)
        pending = h[-1]

        drafts, state, pos = [], pending, len(prompt)
        token = last
        for _ in range(args.k):
            idx = db.add(token, pos, state, True)
            db.process(dft)
            logits = np.ctypeslib.as_array(C.llama_get_logits_ith(dft, idx), shape=(n_vocab,))
            state = np.ctypeslib.as_array(X.llama_get_embeddings_nextn_ith(dft, idx), shape=(n_embd,)).copy()
            token, pos = int(np.argmax(logits)), pos + 1
            drafts.append(token)
        print("target's next token:", last, "MTP drafts:", drafts)

        for i, t in enumerate([last, *drafts]):
            tb.add(t, len(prompt) + i, None, True)
        tb.process(tgt)
        verdict = [int(np.argmax(np.ctypeslib.as_array(C.llama_get_logits_ith(tgt, i), shape=(n_vocab,))))
                   for i in range(len(drafts) + 1)]
        accepted = next((i for i, (d, v) in enumerate(zip(drafts, verdict)) if d != v), len(drafts))
        print("target's verdict:", verdict, "accepted:", accepted, "of", len(drafts))
        C.llama_free(dft)
        C.llama_free(tgt)
        C.llama_model_free(model)


if __name__ == "__main__":
    main()
