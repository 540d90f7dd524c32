"""`specllama models quantize`: a cheaper draft, registered in the user's models.toml.

On a 2-core CPU the 0.5B draft costs ~0.57 of a target decode, mostly in its 152k-row output layer;
Q4_0 kernels are the fastest llama.cpp has on x86, which makes speculation pay sooner.
"""

from __future__ import annotations

import os
from pathlib import Path

from specllama.errors import ConfigError
from specllama.llama.gguf_meta import read_info
from specllama.llama.quantize import quantize
from specllama.models import store
from specllama.models.registry import Registry, user_registry_path
from specllama.models.resolve import resolve
from specllama.models.user_registry import append_entry, entry_text


def quantized_name(name: str, type_name: str) -> str:
    return f"{Path(name).stem if name.endswith('.gguf') else name}-{type_name.lower()}"


def quantize_and_register(ref: str, type_name: str, registry: Registry, new_name: str | None = None,
                          n_threads: int | None = None) -> tuple[str, Path, Path]:
    """Returns (registered name, output file, user registry file)."""
    src = resolve(ref, registry)
    name = new_name or quantized_name(ref, type_name)
    user_file = user_registry_path()
    if name in registry.models:
        raise ConfigError(f"a model named '{name}' is already registered (in {registry.models[name].defined_in}); "
                          "pass --name to choose another")
    dst = store.models_dir() / f"{name}.gguf"
    dst.parent.mkdir(parents=True, exist_ok=True)
    partial = dst.with_name(f".{dst.name}.partial-{os.getpid()}")
    try:
        quantize(src, partial, type_name, n_threads)
        read_info(partial)  # what llama.cpp wrote must read back as a whole GGUF
        os.replace(partial, dst)
    finally:
        partial.unlink(missing_ok=True)
    role = registry.models[ref].role if ref in registry.models else "draft"
    append_entry(user_file, entry_text(name, {"description": f"{ref} requantized to {type_name.upper()} by specllama",
                                              "role": role, "file": dst.name, "path": str(dst)}))
    return name, dst, user_file
