"""How many rows exact mode may batch, read from a file's weight types (specllama/llama/exact_rows.py).

The tiny models' matrices are F16, which tinyBLAS multiplies in batches in another order than one
row (measured: every row differs from 2 rows on), so exact mode on them verifies one token at a
time; the same model requantized to Q8_0 or Q4_0 keeps the full exact batch.
"""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGUFWriter
from gguf import GGMLQuantizationType as T

from specllama.decoding.verifiers import CausalVerifier, exact_limit
from specllama.llama.exact_rows import EXACT_MAX_BATCH, matrix_types
from specllama.llama.model import GGUFModel
from specllama.llama.quantize import quantize
from specllama.runtime import LoadOptions, open_runtime
from tests.support.tiny_gguf import write_tiny_model


@pytest.fixture(scope="module")
def exact_tiny(tmp_path_factory, tokenizer_sources):
    """A tiny model exact mode can load (its Q8_0 cache needs head sizes of 32), as F16 and Q8_0."""
    out = tmp_path_factory.mktemp("exact_tiny")
    f16 = write_tiny_model(out / "f16.gguf", tokenizer_sources["qwen"], n_embd=128, n_ff=256)
    q8 = out / "q8_0.gguf"
    quantize(f16, q8, "Q8_0", pure=True)
    return {"f16": f16, "q8_0": q8}


def test_float_matrices_allow_one_row(tiny_models):
    assert matrix_types(tiny_models["a"]) == {"F16"}
    assert GGUFModel(tiny_models["a"], vocab_only=True).exact_max_batch == 1


@pytest.mark.parametrize("type_name", ["Q8_0", "Q4_0"])
def test_tinyblas_quantized_matrices_keep_the_exact_batch(tiny_models, tmp_path, type_name):
    path = tmp_path / f"{type_name}.gguf"
    quantize(tiny_models["a"], path, type_name, pure=True)
    assert matrix_types(path) == {type_name}
    assert GGUFModel(path, vocab_only=True).exact_max_batch == EXACT_MAX_BATCH


def test_exact_mode_on_float_matrices_is_plain_decoding_and_says_so(exact_tiny):
    said: list[str] = []
    with open_runtime(LoadOptions(target=str(exact_tiny["f16"]), n_ctx=256, load_draft=False, exact=True),
                 status=lambda n: said.append(n.text)) as rt:
        assert exact_limit(CausalVerifier(), rt.target_ctx) == 0  # no drafts: one token a decode
    assert len(said) == 1 and "f16.gguf" in said[0] and "plain decoding" in said[0]


def test_exact_mode_on_q8_0_verifies_full_batches_silently(exact_tiny):
    said: list[str] = []
    with open_runtime(LoadOptions(target=str(exact_tiny["q8_0"]), n_ctx=256, load_draft=False, exact=True),
                 status=lambda n: said.append(n.text)) as rt:
        assert exact_limit(CausalVerifier(), rt.target_ctx) == EXACT_MAX_BATCH - 1  # K drafts + [last]
    assert said == []


def _gguf_with(path, tensors: dict[str, T]):
    """A header-only model: the named 2-row matrices of 32 columns in the given types."""
    writer = GGUFWriter(path, "llama")
    for name, ggml_type in tensors.items():
        block, size = GGML_QUANT_SIZES[ggml_type]
        data = np.zeros((2, 32 // block * size), dtype=np.uint8)
        writer.add_tensor(name, data, raw_dtype=ggml_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_a_looked_up_embedding_does_not_count_but_a_tied_one_does(tmp_path):
    blocks = {"blk.0.ffn_up.weight": T.Q8_0, "token_embd.weight": T.F16}
    separate = _gguf_with(tmp_path / "separate.gguf", {**blocks, "output.weight": T.Q8_0})
    tied = _gguf_with(tmp_path / "tied.gguf", blocks)  # no output.weight: the embedding is the output layer
    assert matrix_types(separate) == {"Q8_0"}
    assert matrix_types(tied) == {"Q8_0", "F16"}
