"""The set-up decode_shapes.py and verify_shapes.py share: a model named on the command line (a GGUF
path or a registry name; by default one of the default pair's), as many layers offloaded as asked, and
one 512-token context on the threads asked."""

from __future__ import annotations

import argparse
from pathlib import Path

from specllama.llama.backend import default_threads
from specllama.llama.context import DecodeContext
from specllama.llama.model import GGUFModel
from specllama.models.registry import load_registry
from specllama.models.resolve import resolve


def add_model_arguments(ap: argparse.ArgumentParser, role: str) -> None:
    """--model (default: the default pair's `role`, "target" or "draft"), --gpu-layers, --threads."""
    ap.add_argument("--model", help=f"a GGUF path or registry name (default: the default pair's {role})")
    ap.add_argument("--gpu-layers", type=int, default=0, help="layers offloaded (-1 all; default 0)")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: all cores)")


def open_context(args: argparse.Namespace, role: str, **context) -> tuple[Path, DecodeContext, int]:
    """(the model's path, a 512-token context on it, its threads) as the arguments above ask;
    `context`: DecodeContext's other settings."""
    registry = load_registry()
    path = resolve(args.model or getattr(registry.pair(None), role), registry, None)
    threads = args.threads or default_threads()
    ctx = DecodeContext(GGUFModel(path, n_gpu_layers=args.gpu_layers), n_ctx=512, n_threads=threads, **context)
    return path, ctx, threads
