"""llama.cpp's quantizer, for a cheaper draft (or a target whose types batch better)."""

from __future__ import annotations

import ctypes
from pathlib import Path

from specllama.errors import SpecllamaError
from specllama.llama.backend import C, default_threads, ensure_backend, last_llama_error

QUANT_TYPES = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K")


def quantize(src: Path, dst: Path, type_name: str, n_threads: int | None = None, *, pure: bool = False) -> None:
    """llama.cpp's quantizer. Requantizing an already quantized file is allowed (the registry's
    drafts are Q4_K_M); the result is only as good as its source. `pure`: every matrix in
    `type_name`, without llama.cpp's mix (which keeps the output layer at Q6_K, for instance)."""
    ftype = getattr(C, f"LLAMA_FTYPE_MOSTLY_{type_name.upper()}", None)
    if type_name.upper() not in QUANT_TYPES or ftype is None:
        raise SpecllamaError(f"unknown quantization type '{type_name}': choose one of {', '.join(QUANT_TYPES)}")
    ensure_backend()
    params = C.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = n_threads or default_threads()
    params.allow_requantize = True
    params.pure = pure
    if C.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params)) != 0:
        raise SpecllamaError(f"llama.cpp could not quantize {src.name} to {type_name}: {last_llama_error()}")
