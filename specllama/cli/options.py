"""Parsed command-line options -> one Resolved, for run, batch, chat, bench, serve and costs alike.

`resolved_for(args)` is the one path: a frozen Intent from the namespace (cli/intent.py), the pure
`resolve` (cli/resolve.py), the inputs checked that would otherwise fail after minutes of loading
(a draft corpus), and the status lines resolving wanted said. Nothing here writes to `args`.
"""

from __future__ import annotations

import argparse

from specllama.cli.intent import Intent
from specllama.cli.resolve import CachedDrafts, Resolved, resolve
from specllama.cli.status import StatusLines


def status_lines(args: argparse.Namespace) -> StatusLines:
    return StatusLines(quiet=getattr(args, "quiet", False), verbose=getattr(args, "verbose", False))


def resolved_for(args: argparse.Namespace, status: StatusLines | None = None, **intent: object) -> Resolved:
    """`intent`: values a command fixes itself (bench's drafters from its configurations)."""
    from specllama.llama.backend import default_threads  # only when a command runs: --help stays instant
    from specllama.models.registry import load_registry

    resolved = resolve(Intent.from_args(args, **intent), load_registry(), CachedDrafts(), cores=default_threads())
    if resolved.load.draft_corpus:
        from specllama.decoding.suffix_drafter import read_corpus

        read_corpus(resolved.load.draft_corpus)  # an unreadable corpus fails in one line before minutes of loading
    for message in resolved.messages:
        (status or status_lines(args))(message)
    return resolved
