"""Toy GGUF models of the architectures people run now, written at test time: hybrid (qwen35:
gated delta-net layers beside attention, with an MTP layer; lfm2: short convolutions beside
attention, per-layer head counts), pure recurrent (mamba) and attention-only (llama).

How: the metadata (the architecture's hyperparameters and a real model's tokenizer, so chat
templates work) is written with the `gguf` package; llama.cpp itself says which tensors that
metadata needs and their shapes (`llama_model_init_from_user`, as its tests/test-llama-archs.cpp
does: it creates every tensor the loader asks for and calls back for its data); those shapes are
then filled with random weights and written with the metadata. So no tensor list is kept here to
drift from llama.cpp's loader: a toy is whatever this llama.cpp loads for that architecture.

Weights are Q8_0 wherever a row allows it (matrices whose rows are a multiple of 32): exact mode
verifies batches of Q8_0 rows (llama/exact_rows.py), so drafting stays on in exact mode, which is
where the greedy-equality tests are meaningful. Convolution kernels and the state-space decay stay
F32, as llama.cpp's quantizer leaves them. The embedding doubles as the output layer (tied), so a
toy with a 150k-token vocabulary is ~12 MB.
"""

from __future__ import annotations

import ctypes
import re
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFValueType, GGUFWriter, quants

from specllama.llama.backend import C, ensure_backend
from tests.support.tiny_gguf import copy_tokenizer_keys, write_out

U32, F32, BOOL = GGUFValueType.UINT32, GGUFValueType.FLOAT32, GGUFValueType.BOOL
Q8_BLOCK = 32


@dataclass(frozen=True)
class ToySpec:
    arch: str
    n_layer: int  # trunk layers (an MTP layer comes on top)
    keys: dict = field(default_factory=dict)  # "{arch}."-relative key -> (value, type)
    n_nextn: int = 0  # MTP (next-n prediction) layers after the trunk
    stdev: float = 0.1  # of the random weights: large enough that the layers, not the tied embedding, pick the next token
    fused_qkv: bool = False  # one attn_qkv tensor a layer instead of attn_q/k/v (mimo2's MTP graph requires it)
    own_output: bool = False  # an output layer of its own, not the embedding (an architecture that requires one)
    leave_out: str = ""  # a pattern of more tensors to leave out (this toy's experts, where it has none)


# Heads of 32: exact mode's Q8_0 cache needs head sizes that are a multiple of its block.
N_EMBD, N_HEAD, N_FF, N_CTX = 64, 2, 128, 4096


def _common(n_layer: int, *, head_count=N_HEAD, head_count_kv=1, ff=N_FF) -> dict:
    return {
        "context_length": (N_CTX, U32),
        "embedding_length": (N_EMBD, U32),
        "block_count": (n_layer, U32),
        "feed_forward_length": (ff, U32),
        "attention.head_count": (head_count, U32),
        "attention.head_count_kv": (head_count_kv, U32),
        "attention.layer_norm_rms_epsilon": (1e-6, F32),
        "rope.freq_base": (10000.0, F32),
    }


def _qwen35() -> ToySpec:
    # 3 trunk layers, full attention every 3rd (layers 0, 1 gated delta-net; 2 attention) + 1 MTP layer.
    n_trunk, n_nextn = 3, 1
    keys = _common(n_trunk + n_nextn, head_count=4)
    keys.update({
        "nextn_predict_layers": (n_nextn, U32),
        "full_attention_interval": (3, U32),
        "attention.key_length": (32, U32),
        "attention.value_length": (32, U32),
        "rope.dimension_count": (16, U32),  # partial rotary, as Qwen3.5's
        "rope.dimension_sections": ([4, 2, 2, 0], U32),
        "ssm.conv_kernel": (4, U32),
        "ssm.state_size": (32, U32),  # head size of the delta-net's keys and values
        "ssm.group_count": (2, U32),  # key heads
        "ssm.time_step_rank": (2, U32),  # value heads
        "ssm.inner_size": (64, U32),  # value heads x head size
    })
    return ToySpec("qwen35", n_trunk, keys, n_nextn)


def _lfm2() -> ToySpec:
    # Per-layer arrays, as LFM2 files have (and llama.cpp's own test models of it): a head count of
    # 0 marks a short-convolution layer.
    keys = _common(4)
    keys.update({
        "attention.head_count": ([N_HEAD] * 4, U32),
        "attention.head_count_kv": ([0, 1, 0, 1], U32),
        "feed_forward_length": ([N_FF] * 4, U32),
        "shortconv.l_cache": (3, U32),
    })
    return ToySpec("lfm2", 4, keys)


def _mamba() -> ToySpec:
    keys = _common(2, head_count=0, head_count_kv=0)  # no attention: as llama.cpp's converter writes Mamba
    keys.update({
        "ssm.conv_kernel": (4, U32),
        "ssm.inner_size": (2 * N_EMBD, U32),
        "ssm.state_size": (16, U32),
        "ssm.time_step_rank": (32, U32),  # the rows of ssm_dt: a multiple of 32, so Q8_0
    })
    return ToySpec("mamba", 2, keys, stdev=0.3)


def _mimo2() -> ToySpec:
    # Two MTP layers, chained (llama/mtp.py: head i drafts position i): of the architectures the
    # vendored llama.cpp builds with more than one head (step35, mimo2, hy-v3) the one whose dense
    # form needs least. Sliding-window attention on the trunk's second layer and the heads; no experts.
    n_trunk, n_nextn = 2, 2
    keys = _common(n_trunk + n_nextn)
    keys.update({
        "nextn_predict_layers": (n_nextn, U32),
        "rope.dimension_count": (32, U32),
        "expert_count": (0, U32),
        "expert_used_count": (0, U32),
        "expert_feed_forward_length": (N_FF, U32),
        "attention.sliding_window": (64, U32),
        "attention.sliding_window_pattern": ([False, True, True, True], BOOL),
        "attention.key_length": (32, U32),
        "attention.value_length": (32, U32),
    })
    return ToySpec("mimo2", n_trunk, keys, n_nextn, fused_qkv=True, own_output=True,
                   leave_out=r"_exps\.|\.ffn_gate_inp\.|\.exp_probs_b\.|\.attn_sinks\.")


def _llama() -> ToySpec:
    return ToySpec("llama", 2, _common(2) | {"rope.dimension_count": (N_EMBD // N_HEAD, U32)})


TOY_SPECS = {"qwen35": _qwen35, "lfm2": _lfm2, "mamba": _mamba, "llama": _llama, "mimo2": _mimo2}


def _metadata(writer: GGUFWriter, spec: ToySpec, tokenizer_from: Path) -> None:
    writer.add_name(f"toy-{spec.arch}")
    writer.add_file_type(7)  # LLAMA_FTYPE_MOSTLY_Q8_0
    n_vocab = copy_tokenizer_keys(writer, tokenizer_from)
    writer.add_vocab_size(n_vocab)
    for key, (value, vtype) in spec.keys.items():
        full = f"{spec.arch}.{key}"
        if isinstance(value, list):
            writer.add_key_value(full, value, GGUFValueType.ARRAY, sub_type=vtype)
        else:
            writer.add_key_value(full, value, vtype)


class _Tensor(ctypes.Structure):
    # The head of ggml.h's struct ggml_tensor (stable for years): type, buffer, ne[4].
    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64 * 4)]


def _ggml() -> ctypes.CDLL:
    lib = Path(C.__file__).parent / "lib" / "libggml-base.so"
    ggml = ctypes.CDLL(str(lib))
    ggml.gguf_init_from_file.restype = ctypes.c_void_p
    ggml.gguf_init_from_file.argtypes = [ctypes.c_char_p, _GgufInitParams]
    ggml.gguf_free.argtypes = [ctypes.c_void_p]
    ggml.ggml_get_name.restype = ctypes.c_char_p
    ggml.ggml_get_name.argtypes = [ctypes.c_void_p]
    return ggml


class _GgufInitParams(ctypes.Structure):
    _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.c_void_p)]


def tensor_shapes(metadata_path: Path, *, load_mtp: bool = True) -> dict[str, tuple[int, ...]]:
    """The tensors llama.cpp's loader creates for this metadata: name -> numpy shape (ggml's ne
    reversed, trailing 1s dropped as the gguf package writes them)."""
    ensure_backend()
    ggml = _ggml()
    ctx = ggml.gguf_init_from_file(str(metadata_path).encode(), _GgufInitParams(True, None))
    if not ctx:
        raise RuntimeError(f"ggml could not read {metadata_path}")
    shapes: dict[str, tuple[int, ...]] = {}

    @C.llama_model_set_tensor_data_t if hasattr(C, "llama_model_set_tensor_data_t") else ctypes.CFUNCTYPE(
        None, ctypes.c_void_p, ctypes.c_void_p)
    def record(tensor, _user_data):
        t = _Tensor.from_address(tensor)
        ne = list(t.ne)
        while len(ne) > 1 and ne[-1] == 1:
            ne.pop()
        shapes[ggml.ggml_get_name(tensor).decode()] = tuple(reversed(ne))

    params = C.llama_model_default_params()
    params.load_mtp = load_mtp
    try:
        model = C.llama_model_init_from_user(ctx, record, None, params)
        if not model:
            raise RuntimeError(f"llama.cpp could not build a model from {metadata_path}")
        C.llama_model_free(model)
    finally:
        ggml.gguf_free(ctx)
    return shapes


# What llama.cpp creates when nothing says a tensor is absent, yet real files of these families lack:
# per-tensor quantization scales, attention biases, an output layer of its own (the embedding
# doubles as it), the MTP layer's own embedding and head (it shares the trunk's). Left out.
_OPTIONAL = re.compile(r"\.(input_)?scale$|\.attn_[qkv]\.bias$|^output\.weight$|\.nextn\.(embed_tokens|shared_head_head)\.")

_F32_ONLY = ("ssm_conv1d", "shortconv.conv", "ssm_a")  # not multiplied: left F32 as llama.cpp's quantizer leaves them


def _weights(name: str, shape: tuple[int, ...], rng: np.random.Generator,
             stdev: float) -> tuple[np.ndarray, GGMLQuantizationType | None]:
    if name.endswith("norm.weight"):
        return np.ones(shape, dtype=np.float32), None
    data = rng.standard_normal(shape, dtype=np.float32) * stdev
    if "ssm_a" in name:
        data = -np.abs(data) - 0.5  # a state that decays, as trained models' do
    if len(shape) >= 2 and shape[-1] % Q8_BLOCK == 0 and not any(part in name for part in _F32_ONLY):
        return quants.quantize(data, GGMLQuantizationType.Q8_0), GGMLQuantizationType.Q8_0
    return data, None


def write_toy_model(out_path: str | Path, arch: str, tokenizer_from: str | Path, *, seed: int = 0) -> Path:
    """Write the toy of `arch` (a TOY_SPECS name) with tokenizer_from's vocabulary and chat template."""
    spec = TOY_SPECS[arch]()
    out_path = Path(out_path)
    with tempfile.TemporaryDirectory() as tmp:
        meta = Path(tmp) / "metadata.gguf"
        writer = GGUFWriter(meta, spec.arch)
        _metadata(writer, spec, Path(tokenizer_from))
        write_out(writer)
        shapes = tensor_shapes(meta)
    if spec.fused_qkv:
        shapes = _fused_qkv(shapes)
    writer = GGUFWriter(out_path, spec.arch)
    _metadata(writer, spec, Path(tokenizer_from))
    for name, shape in sorted(shapes.items(), key=lambda item: _order(item[0])):
        if (_OPTIONAL.search(name) and not (spec.own_output and name == "output.weight")
                or spec.leave_out and re.search(spec.leave_out, name)):
            continue
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        data, qtype = _weights(name, shape, rng, spec.stdev)
        writer.add_tensor(name, data, raw_dtype=qtype)
    write_out(writer)
    return out_path


def _fused_qkv(shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """attn_q/k/v of each layer as the one attn_qkv tensor a converter writes where the model has it."""
    out = {}
    for name, shape in shapes.items():
        if name.endswith(".attn_q.weight"):
            base = name[:-len(".attn_q.weight")]
            rows = sum(shapes[f"{base}.attn_{p}.weight"][0] for p in "qkv")
            out[f"{base}.attn_qkv.weight"] = (rows, shape[1])
        elif not (name.endswith(".attn_k.weight") or name.endswith(".attn_v.weight")):
            out[name] = shape
    return out


def _order(name: str) -> tuple:
    parts = name.split(".")
    return (int(parts[1]) if parts[0] == "blk" else (-1 if parts[0] == "token_embd" else 1 << 20), name)

