"""The toy models of tests/support/toy_models.py are what they claim: llama.cpp loads each as its
architecture, with the layers that make it hybrid, recurrent or MTP-carrying, in a few MB of
weights; and what specllama reads from their headers before loading (the KV cache's size, which
rows stay exact) handles their per-layer hyperparameters."""

from __future__ import annotations

import numpy as np
import pytest

from specllama.llama.backend import C
from specllama.llama.context import DecodeContext
from specllama.llama.exact_rows import EXACT_MAX_BATCH, exact_max_batch
from specllama.llama.gguf_header import SkippedArray, read_header
from specllama.llama.kv_memory import kv_bytes_per_token
from specllama.llama.model import GGUFModel

# arch -> (recurrent, hybrid, MTP layers)
KINDS = {"qwen35": (False, True, 1), "lfm2": (False, True, 0), "mamba": (True, False, 0), "llama": (False, False, 0)}


@pytest.mark.parametrize("arch", list(KINDS))
def test_llama_cpp_loads_each_toy_as_its_architecture(toy_models, arch):
    model = GGUFModel(toy_models[arch])
    recurrent, hybrid, nextn = KINDS[arch]
    assert model.info.architecture == arch
    assert (bool(C.llama_model_is_recurrent(model._model)), bool(C.llama_model_is_hybrid(model._model))) == (recurrent, hybrid)
    assert C.llama_model_n_layer_nextn(model._model) == nextn
    ctx = DecodeContext(model, n_ctx=128, n_threads=1)
    rows = ctx.decode(model.tokenize("hello world, hello"), logits="all")
    assert np.isfinite(rows).all() and len(set(np.argmax(rows, axis=1))) > 1  # random, not degenerate
    # Weights small enough to generate per test session: the vocabulary's embedding is most of it.
    weights = sum(t.n_bytes for t in read_header(toy_models[arch], decode_arrays=False).tensors)
    assert weights < 16e6


def test_the_qwen35_toy_mixes_linear_attention_attention_and_an_mtp_layer(toy_models):
    names = {t.name for t in read_header(toy_models["qwen35"], decode_arrays=False).tensors}
    assert {"blk.0.ssm_a", "blk.0.attn_qkv.weight", "blk.2.attn_q.weight", "blk.3.nextn.eh_proj.weight"} <= names


def test_per_layer_head_counts_give_the_cache_size_of_the_attention_layers_only(toy_models):
    """LFM2 files carry head counts per layer (0 for a convolution layer): reading them raised a
    TypeError (int() of an undecoded array) when loading such a file."""
    header = read_header(toy_models["lfm2"], decode_arrays=False)
    assert all(isinstance(header.get(f"lfm2.{key}"), SkippedArray)
               for key in ("attention.head_count", "attention.head_count_kv", "feed_forward_length"))
    # Two attention layers of one KV head of 32 (keys and values), f16: 2 x 1 x (32 + 32) x 2 bytes.
    assert kv_bytes_per_token(toy_models["lfm2"]) == 256
    # Qwen3.5: only every third trunk layer is attention; the MTP layer has a context of its own.
    assert kv_bytes_per_token(toy_models["qwen35"]) == 1 * 1 * (32 + 32) * 2
    assert kv_bytes_per_token(toy_models["mamba"]) == 0  # no attention at all
    assert kv_bytes_per_token(toy_models["llama"]) == 2 * 1 * (32 + 32) * 2


@pytest.mark.parametrize("arch", list(KINDS))
def test_exact_mode_verifies_batches_on_every_toy(toy_models, arch):
    """Their matrices are Q8_0; the F32 convolution kernels and Mamba's A are read by no matmul,
    so they do not make exact mode one row at a time."""
    assert exact_max_batch(toy_models[arch], EXACT_MAX_BATCH) == EXACT_MAX_BATCH
