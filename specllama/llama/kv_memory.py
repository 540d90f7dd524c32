"""What one sequence's KV cache costs in memory, read from the GGUF header before any context is
made, and how much memory the machine has free.

Why it matters: llama.cpp allocates (and clears) every sequence's cells when a context is made,
whether a sequence is ever used or not. A per-sequence cache (kv_unified = false, what several
prompts per decode use) holds n_ctx cells for each of n_seq_max sequences: 16 slots of the 1.5B
target at 4,096 tokens are 1.8 GB, allocated and cleared in 2.8 s on the 2-core machine, while a
decode of three sequences costs the same with 3 slots or 16 (bench/measured/vm-20261125-kv-slots.md).
"""

from __future__ import annotations

import math
from pathlib import Path

from specllama.llama.gguf_header import SkippedArray, read_header

# llama.cpp rounds a sequence's cells up to a multiple of this (n_ctx 1000 -> 1024 cells in
# 0.3.36's log: "n_ctx_seq = 1024"); the estimate rounds the same way.
KV_CELL_BLOCK = 256
F16_BYTES = 2.0
Q8_0_BYTES = 34 / 32  # exact mode's cache type: 32 int8 values and one f16 scale per block


def kv_bytes_per_token(path: str | Path, *, q8_0_cache: bool = False) -> int:
    """K and V bytes one token takes in every layer's cache: layers x KV heads x (key + value
    head size) x element size. Per-layer head counts (some architectures) are summed per layer."""
    header = read_header(path, decode_arrays=False)
    arch = header.get("general.architecture")
    heads_kv = header.get(f"{arch}.attention.head_count_kv")
    if isinstance(heads_kv, SkippedArray):  # one count per layer: decode just that array
        header = read_header(path, decode_arrays={f"{arch}.attention.head_count_kv"})
        heads_kv = header.get(f"{arch}.attention.head_count_kv")
    n_layers = int(header.get(f"{arch}.block_count") or 0)
    n_head = int(header.get(f"{arch}.attention.head_count") or 1)
    n_embd = int(header.get(f"{arch}.embedding_length") or 0)
    head_k = int(header.get(f"{arch}.attention.key_length") or n_embd // max(n_head, 1))
    head_v = int(header.get(f"{arch}.attention.value_length") or n_embd // max(n_head, 1))
    per_layer = list(heads_kv) if isinstance(heads_kv, list) else [int(heads_kv or n_head)] * n_layers
    elements = sum(per_layer[:n_layers]) * (head_k + head_v)
    return math.ceil(elements * (Q8_0_BYTES if q8_0_cache else F16_BYTES))


def cells_per_sequence(n_ctx: int) -> int:
    return -(-n_ctx // KV_CELL_BLOCK) * KV_CELL_BLOCK


def kv_bytes_per_sequence(path: str | Path, n_ctx: int, *, q8_0_cache: bool = False) -> int:
    return kv_bytes_per_token(path, q8_0_cache=q8_0_cache) * cells_per_sequence(n_ctx)


def available_memory() -> int | None:
    """Bytes the machine can still give without swapping: Linux's MemAvailable; elsewhere None
    (macOS has no such figure without a native call: the caller then sets no memory bound)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def human_bytes(n: float) -> str:
    if n >= 1e9:
        return f"{n / 1e9:.1f} GB"
    return f"{n / 1e6:,.0f} MB" if n >= 1e6 else f"{n / 1e3:,.0f} kB"
