"""llama.cpp really gets the attention a DecodeContext chose: without flash attention it lays the V
cache out transposed, so a sequence's state saved one way is refused the other (which is also why
the prompt cache keeps each way's entries apart). And a greedy decode gives the same tokens either
way on a tiny model."""

from __future__ import annotations

import numpy as np

from specllama.llama.attention import OFF_MIN_CTX
from specllama.llama.context import DecodeContext
from specllama.llama.model import GGUFModel


def test_the_context_is_created_with_the_attention_chosen(tiny_models):
    model = GGUFModel(tiny_models["a"])
    contexts = []
    try:
        off, off2, on = (DecodeContext(model, n_ctx=n_ctx, n_threads=1, flash_attn=fa)
                         for fa, n_ctx in (("auto", OFF_MIN_CTX), ("off", 256), ("on", 256)))
        contexts = [off, off2, on]
        assert (off.flash_attn, off2.flash_attn, on.flash_attn) == ("off", "off", "on")  # auto, a deep context: off
        prompt = list(range(100, 140))
        a = off.decode(prompt, logits="all").argmax(axis=1)
        b = on.decode(prompt, logits="all").argmax(axis=1)
        assert np.mean(a == b) > 0.9  # the same model, two summation orders: nearly always the same argmax
        state = off.sequence_state(0)
        assert state is not None
        assert off2.set_sequence_state(0, bytearray(state), prompt)  # another size: cells are per token  # same layout: restored
        assert not on.set_sequence_state(0, bytearray(state), prompt)  # transposed V: refused, left empty
        assert on.n_past == 0
    finally:
        for ctx in contexts:
            ctx.close()
        model.close()
