"""How many rows a decode batch may hold in exact mode, from a file's weight types.

Exact mode (no repacked weights, flash attention over a Q8_0 cache) makes a row's logits the same
whatever batch it is decoded in only while every weight matmul of a batch sums in the one-row
order. llamafile's tinyBLAS, compiled into this build, takes batched matmuls of some types from 2
rows on. Measured with scripts/measure/exact_rows.py (Qwen2.5-Coder 1.5B requantized, x86 AVX-512
build of llama-cpp-python 0.3.36, 2 threads), each row of batches of 1-8 against its one-row decode:
- Q4_K/Q6_K (the Q4_K_M file, not tinyBLAS types): bit-identical up to 7 rows, all rows differ at 8.
- Q8_0, Q4_0 and Q5_0, every matrix (tinyBLAS's quantized kernel sums block by block like the
  one-row dot product): bit-identical at every n up to 8.
- F16 (a random 2-layer model, n_embd 128): every row differs from 2 rows on (1e-7 at 2, 2e-4 at
  8): tinyBLAS's float kernel accumulates in another order than ggml's one-row F16 dot product.
So a file with float matrices is exact only one row at a time: exact mode on it is plain decoding.
"""

from __future__ import annotations

from pathlib import Path

# In exact mode a row's logits are bit-identical whatever batch it is decoded in, up to this many
# rows per decode. Measured on this build (AVX-512, 1 and 2 threads, Qwen2.5-Coder 1.5B Q4_K_M,
# flash attention, Q8_0 cache): every row of batches of 1-7 equals its one-row decode exactly; from
# 8 rows on every row differs by up to 0.56 logits (some ggml kernel switches there; not yet traced).
# So exact mode keeps every verification batch at or below it.
EXACT_MAX_BATCH = 7

# Types whose batches take a kernel that sums in another order from 2 rows on: F16 measured; F32
# and BF16 go through the same tinyBLAS float kernel.
# Names, not gguf's enum: the command line reads EXACT_MAX_BATCH for its help without importing gguf.
ONE_ROW_TYPES = frozenset({"F32", "F16", "BF16"})

# Two-dimensional tensors no matmul reads, so their type does not decide how a batch sums: the
# convolution kernels of state-space and short-convolution layers (ggml_ssm_conv: each output is
# one window's dot product) and Mamba's state decay (ssm_scan, element by element, token by token).
# llama.cpp's quantizer keeps them F32 in every quantized file; counting them made every hybrid
# model "exact only one row at a time".
NOT_MULTIPLIED = ("ssm_conv1d.", "shortconv.conv.", ".ssm_a")


def matrix_types(path: str | Path) -> set[str]:
    """The type names of the weights the decoder multiplies by: every matrix, except a token
    embedding that is only looked up (an output layer of its own exists; otherwise it doubles as one)."""
    from specllama.llama.gguf_header import read_header

    tensors = read_header(path, decode_arrays=False).tensors
    names = {t.name for t in tensors}
    return {t.ggml_type.name for t in tensors
            if len(t.shape) >= 2 and not (t.name == "token_embd.weight" and "output.weight" in names)
            and not any(part in t.name for part in NOT_MULTIPLIED)}


def exact_max_batch(path: str | Path, limit: int) -> int:
    """The most rows a decode may hold with each row's logits independent of the batch: `limit`
    (what the quantized types were measured exact up to), or 1 for a file with float matrices."""
    return 1 if matrix_types(path) & ONE_ROW_TYPES else limit
