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
F32_BYTES = 4  # recurrent states are F32 (llama-model.cpp: recurrent_type_r/s)


def kv_bytes_per_token(path: str | Path, *, q8_0_cache: bool = False) -> int:
    """K and V bytes one token takes in every attention layer's cache: KV heads x (key + value
    head size) x element size, summed over the layers that have an attention cache. Head counts
    may be one per layer (LFM2: 0 for a convolution layer); a hybrid model's linear-attention
    layers (Qwen3.5, every `full_attention_interval`-th layer is attention) and MTP layers (a
    context of their own) hold no cells; a pure recurrent model (Mamba) holds none at all (its
    fixed-size state per sequence: recurrent_state_bytes)."""
    header, arch, n_layers = _layers(path)
    n_embd = _int(header, f"{arch}.embedding_length")
    heads_kv = _heads_kv(header, arch, n_layers)
    widest = max(_per_layer(header.get(f"{arch}.attention.head_count"), n_layers, 1), default=1) or 1
    head_k = _int(header, f"{arch}.attention.key_length") or n_embd // widest
    head_v = _int(header, f"{arch}.attention.value_length") or n_embd // widest
    elements = sum(heads_kv) * (head_k + head_v)
    return math.ceil(elements * (Q8_0_BYTES if q8_0_cache else F16_BYTES))


def recurrent_state_bytes(path: str | Path) -> int:
    """One copy of a sequence's recurrent state: every recurrent layer's (a layer without
    attention cells) convolution rows (r) and state (s), F32, sized as llama.cpp's
    llama_hparams::n_embd_r / n_embd_s size them (src/llama-hparams.cpp) for Mamba/Mamba2, the
    gated delta-net of Qwen3-Next/3.5, LFM2's short convolutions and RWKV; 0 for an
    attention-only model. llama.cpp allocates 1 + n_rs_seq of these per sequence (its snapshots,
    src/llama-memory-recurrent.cpp: `n_rows = mem_size * (1 + n_rs_seq)`)."""
    header, arch, n_layers = _layers(path)
    n_embd = _int(header, f"{arch}.embedding_length")
    d_conv, d_inner = _int(header, f"{arch}.ssm.conv_kernel"), _int(header, f"{arch}.ssm.inner_size")
    d_state, n_group = _int(header, f"{arch}.ssm.state_size"), _int(header, f"{arch}.ssm.group_count")
    wkv, l_cache = _int(header, f"{arch}.wkv.head_size"), _int(header, f"{arch}.shortconv.l_cache")
    if wkv:  # RWKV: token shifts and the wkv state
        r, s = (_int(header, f"{arch}.token_shift_count") or 2) * n_embd, n_embd * wkv
    elif l_cache:  # LFM2's short convolutions: no state beside them
        r, s = n_embd * (l_cache - 1), d_state * d_inner
    else:
        r, s = max(d_conv - 1, 0) * (d_inner + 2 * n_group * d_state), d_state * d_inner
    if not r + s:
        return 0
    recurrent = sum(1 for h in _heads_kv(header, arch, n_layers) if h == 0)
    return recurrent * (r + s) * F32_BYTES


def state_bytes_per_sequence(path: str | Path, snapshots: int, checkpoints: int) -> int:
    """All a sequence's recurrent state takes: the live copy and its `snapshots` in the context
    (n_rs_seq), and the `checkpoints` copies kept in host memory (llama/rollback.py)."""
    return recurrent_state_bytes(path) * (1 + snapshots + checkpoints)


def mtp_kv_bytes_per_token(path: str | Path) -> int:
    """K and V bytes (f16) one token takes in an MTP draft context's cache (llama/mtp.py): its
    nextn layers, each an attention layer; 0 without them."""
    header, arch, n_layers = _layers(path)
    nextn = _int(header, f"{arch}.nextn_predict_layers")
    if not nextn:
        return 0
    n_embd = _int(header, f"{arch}.embedding_length")
    heads = _per_layer(header.get(f"{arch}.attention.head_count"), n_layers + nextn, 1)[n_layers:]
    heads_kv = _per_layer(header.get(f"{arch}.attention.head_count_kv"), n_layers + nextn, None)[n_layers:] or heads
    widest = max(heads, default=1) or 1
    head_k = _int(header, f"{arch}.attention.key_length") or n_embd // widest
    head_v = _int(header, f"{arch}.attention.value_length") or n_embd // widest
    return math.ceil(sum(heads_kv) * (head_k + head_v) * F16_BYTES)


def _layers(path: str | Path):
    """The header (per-layer arrays decoded), its architecture, and its trunk's layer count
    (MTP layers are a context of their own)."""
    header = read_header(path, decode_arrays=False)
    arch = header.get("general.architecture")
    arrays = {f"{arch}.attention.head_count", f"{arch}.attention.head_count_kv", f"{arch}.feed_forward_length"}
    if any(isinstance(header.get(key), SkippedArray) for key in arrays):  # one value per layer: decode just those
        header = read_header(path, decode_arrays=arrays)
    return header, arch, _int(header, f"{arch}.block_count") - _int(header, f"{arch}.nextn_predict_layers")


def _heads_kv(header, arch: str, n_layers: int) -> list[int]:
    """KV heads per trunk layer, 0 for a layer without attention cells."""
    heads = _per_layer(header.get(f"{arch}.attention.head_count"), n_layers, 1)
    heads_kv = _per_layer(header.get(f"{arch}.attention.head_count_kv"), n_layers, None) or heads
    interval = _int(header, f"{arch}.full_attention_interval")
    if interval:  # the other layers are linear attention (Qwen3-Next, Qwen3.5): no cells
        heads_kv = [h if (i + 1) % interval == 0 else 0 for i, h in enumerate(heads_kv)]
    return heads_kv


def _int(header, key: str) -> int:
    value = header.get(key)
    return int(value) if isinstance(value, (int, float)) else 0


def _per_layer(value, n_layers: int, default: int | None) -> list[int]:
    """A hyperparameter given once or once per layer, as one value per layer ([] when absent
    and no default)."""
    if isinstance(value, list):
        return [int(v) for v in value[:n_layers]]
    if isinstance(value, (int, float)):
        return [int(value)] * n_layers
    return [] if default is None else [default] * n_layers


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
