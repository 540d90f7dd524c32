"""`specllama models list | pull | info | check`."""

from __future__ import annotations

import argparse

from specllama.cli.progress import download_bar
from specllama.llama.gguf_meta import check_compatibility, read_info
from specllama.models import store
from specllama.models.registry import load_registry
from specllama.models.resolve import resolve


def _size(n: int | None) -> str:
    return f"{n / 1e6:,.0f} MB" if n else "?"


def cmd_list(args: argparse.Namespace) -> int:
    registry = load_registry()
    rows = [("NAME", "ROLE", "SIZE", "CACHED", "SOURCE", "DESCRIPTION")]
    for spec in registry.models.values():
        source = "path" if spec.path else "registry" if spec.registry else "hub"
        cached = "yes" if store.is_available(spec) else "no"
        size = spec.expected_size or (store.model_path(spec).stat().st_size if store.is_available(spec) else None)
        rows.append((spec.name, spec.role, _size(size), cached, source, spec.description))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    print("\npairs: " + ", ".join(f"{p.name} ({p.draft} -> {p.target})" + (" [default]" if p.name == registry.default_pair else "")
                                  for p in registry.pairs.values()))
    print(f"cache: {store.models_dir()}   registries: {', '.join(map(str, registry.files))}")
    return 0


def cmd_pull(args: argparse.Namespace) -> int:
    import sys

    spec = load_registry().model(args.name)
    refetch = False
    if store.is_available(spec):
        # The right size is not the right file: "already there" only once the checksum agrees.
        status, detail = store.verify(spec)
        if status != "MISMATCH":
            print(f"{spec.name}: already at {store.model_path(spec)}")
            return 0
        if spec.path is not None:  # a local file is the user's: never replaced
            print(f"{spec.name}: {detail}", file=sys.stderr)
            return 1
        print(f"{spec.name}: the cached file differs from models.toml (sha256); fetching it again", file=sys.stderr)
        refetch = True
    with download_bar() as progress:
        path = store.ensure(spec, progress, allow_hub=args.from_hub, refetch=refetch)
    print(f"{spec.name}: {path}")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    with download_bar() as progress:
        path = resolve(args.model, load_registry(), progress)
    print(read_info(path).summary())
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    registry = load_registry()
    with download_bar() as progress:
        draft = resolve(args.draft, registry, progress)
        target = resolve(args.target, registry, progress)
    report = check_compatibility(draft, target)
    print(report.summary())
    return 0 if report.compatible else 1


def cmd_quantize(args: argparse.Namespace) -> int:
    from specllama.models.quantized import quantize_and_register

    registry = load_registry(user_may_be_missing=True)  # the result is registered there, creating it
    with download_bar() as progress:
        resolve(args.model, registry, progress)  # fetch first, so the quantizer never waits on a download
    name, path, user_file = quantize_and_register(args.model, args.type, registry, args.name, args.threads)
    info = read_info(path)
    print(f"{name}: {path} ({info.quantization}, {info.file_size / 1e6:,.0f} MB), registered in {user_file}")
    print(f"use it as a draft: specllama run --draft {name} ...")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """sha256 of each cached model against models.toml, one line each; exit 1 on a mismatch."""
    registry = load_registry()
    specs = [registry.model(args.name)] if args.name else list(registry.models.values())
    mismatched = False
    for spec in specs:
        status, detail = store.verify(spec)
        mismatched |= status == "MISMATCH"
        print(f"{spec.name}: {status}" + (f" ({detail})" if status == "MISMATCH" else ""))
    return 1 if mismatched else 0


def dispatch(args: argparse.Namespace) -> int:
    return {"list": cmd_list, "pull": cmd_pull, "info": cmd_info, "check": cmd_check,
            "quantize": cmd_quantize, "verify": cmd_verify}[args.models_command](args)
