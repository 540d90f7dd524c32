"""Tiny random-weight GGUF models that llama.cpp can load, for fast tests.

A real model is hundreds of MB and seconds to load; these have 2 layers of width 64 and load in
milliseconds, yet carry a real model's complete tokenizer (copied from its header), so
tokenization, chat templates and draft/target vocabulary checks behave exactly as with the real
model. Their outputs are meaningless but deterministic for a given seed.

Also here: helpers that produce broken files for error-path tests.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
from gguf import GGUFValueType, GGUFWriter, LlamaFileType

from specllama.llama.gguf_meta import MetadataValue, read_header


@functools.lru_cache(maxsize=4)
def _tokenizer_metadata(source: Path) -> tuple[tuple[str, MetadataValue], ...]:
    # Cached: every tiny model built from one source in a test session shares the parse.
    header = read_header(source)
    return tuple((k, v) for k, v in header.metadata.items() if k.startswith("tokenizer."))


def _writable(entry: MetadataValue) -> object:
    # Token strings were decoded with surrogateescape (a token may be a partial UTF-8 sequence);
    # hand GGUFWriter the original bytes so they round-trip exactly.
    if entry.type == GGUFValueType.STRING:
        return entry.value.encode("utf-8", "surrogateescape")
    if entry.type == GGUFValueType.ARRAY and entry.sub_type == GGUFValueType.STRING:
        return [s.encode("utf-8", "surrogateescape") for s in entry.value]
    return entry.value


def copy_tokenizer_keys(writer: GGUFWriter, tokenizer_from: Path, chat_template: str | None = None,
                        control: tuple[str, ...] = ()) -> int:
    """Copy every tokenizer.* key with its original GGUF type (`chat_template`: another template in
    place of the source's; `control`: token texts made control tokens, as another family's markers
    are). Returns the vocab size."""
    n_vocab = 0
    metadata = _tokenizer_metadata(Path(tokenizer_from).resolve())
    tokens = dict(metadata)["tokenizer.ggml.tokens"].value
    control_ids = {i for i, text in enumerate(tokens) if text in control}
    if chat_template is not None:
        writer.add_chat_template(chat_template)
    for key, entry in metadata:
        if chat_template is not None and key == "tokenizer.chat_template":
            continue
        if key == "tokenizer.ggml.token_type" and control_ids:
            types = [3 if i in control_ids else t for i, t in enumerate(entry.value)]  # 3: LLAMA_TOKEN_TYPE_CONTROL
            writer.add_key_value(key, types, entry.type, sub_type=entry.sub_type)
            continue
        if entry.type == GGUFValueType.ARRAY and not entry.value:
            continue  # GGUFWriter refuses empty arrays; llama.cpp treats absent the same
        writer.add_key_value(key, _writable(entry), entry.type, sub_type=entry.sub_type)
        if key == "tokenizer.ggml.tokens":
            n_vocab = len(entry.value)
    if not n_vocab:
        raise ValueError(f"{tokenizer_from} has no tokenizer.ggml.tokens to borrow")
    return n_vocab


def write_tiny_model(
    out_path: str | Path,
    tokenizer_from: str | Path,
    *,
    n_layer: int = 2,
    n_embd: int = 64,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int = 128,
    n_ctx: int = 512,
    seed: int = 0,
    arch: str = "llama",
    norm_value: float = 1.0,
    chat_template: str | None = None,
    control: tuple[str, ...] = (),
) -> Path:
    """Write a random-weight `arch` (llama-layout) transformer using tokenizer_from's vocabulary;
    `norm_value` fills the norms (NaN: a damaged file whose every logit is NaN); `chat_template`
    replaces the borrowed one (a thinking model's, say); `control`: token texts made control tokens."""
    if n_embd % n_head or n_head % n_head_kv:
        raise ValueError("n_embd must divide by n_head, and n_head by n_head_kv")
    out_path = Path(out_path)
    head_dim = n_embd // n_head
    n_embd_kv = head_dim * n_head_kv
    rng = np.random.default_rng(seed)

    writer = GGUFWriter(out_path, arch)
    writer.add_name(f"tiny-{arch}-L{n_layer}-E{n_embd}-seed{seed}")
    writer.add_file_type(LlamaFileType.MOSTLY_F16)  # matrices are F16, norms F32 (like converters)
    n_vocab = copy_tokenizer_keys(writer, Path(tokenizer_from), chat_template, control)
    writer.add_context_length(n_ctx)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_vocab_size(n_vocab)

    # GGUFWriter takes numpy arrays in row-major order; ggml's ne is the numpy shape reversed.
    # So a ggml {n_embd, n_vocab} embedding is numpy (n_vocab, n_embd): one row per token.
    # Weights ~ N(0, 0.02) like a freshly initialised transformer: logits stay finite and
    # spread out, so greedy decoding does not collapse onto one token; norms are 1.
    def matrix(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    def norm() -> np.ndarray:
        return np.full(n_embd, norm_value, dtype=np.float32)

    writer.add_tensor("token_embd.weight", matrix(n_vocab, n_embd))
    for i in range(n_layer):
        block = f"blk.{i}"
        writer.add_tensor(f"{block}.attn_norm.weight", norm())
        writer.add_tensor(f"{block}.attn_q.weight", matrix(n_embd, n_embd))
        writer.add_tensor(f"{block}.attn_k.weight", matrix(n_embd_kv, n_embd))
        writer.add_tensor(f"{block}.attn_v.weight", matrix(n_embd_kv, n_embd))
        writer.add_tensor(f"{block}.attn_output.weight", matrix(n_embd, n_embd))
        writer.add_tensor(f"{block}.ffn_norm.weight", norm())
        writer.add_tensor(f"{block}.ffn_gate.weight", matrix(n_ff, n_embd))
        writer.add_tensor(f"{block}.ffn_up.weight", matrix(n_ff, n_embd))
        writer.add_tensor(f"{block}.ffn_down.weight", matrix(n_embd, n_ff))
    writer.add_tensor("output_norm.weight", norm())
    writer.add_tensor("output.weight", matrix(n_vocab, n_embd))

    write_out(writer)
    return out_path


def write_out(writer: GGUFWriter) -> None:
    """Header, metadata, tensors: the file as llama.cpp reads it (the writer is closed whatever happens)."""
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()


def tiny_model_param_count(
    n_vocab: int, *, n_layer: int = 2, n_embd: int = 64, n_head: int = 4, n_head_kv: int = 2,
    n_ff: int = 128,
) -> int:
    """Elements written by write_tiny_model with these sizes (for asserting n_params)."""
    n_embd_kv = n_embd // n_head * n_head_kv
    per_block = 2 * n_embd + 2 * n_embd * n_embd + 2 * n_embd * n_embd_kv + 3 * n_embd * n_ff
    return 2 * n_vocab * n_embd + n_layer * per_block + n_embd


def write_truncated_copy(src: str | Path, dst: str | Path, keep_fraction: float = 0.5) -> Path:
    """Copy the first keep_fraction of src's bytes: an interrupted download."""
    data = Path(src).read_bytes()
    Path(dst).write_bytes(data[: int(len(data) * keep_fraction)])
    return Path(dst)


def write_not_gguf(dst: str | Path, text: str = "hello, I am not a model\n") -> Path:
    """A text file with a .gguf name: what a saved HTML error page or a typo looks like."""
    Path(dst).write_text(text)
    return Path(dst)
