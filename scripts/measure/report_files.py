"""OUT.md and OUT.json of a measurement: its title and time, the exact command, what it measured
(machine, threads, models: `head`), its table, and every run for the JSON; and the names a report
gives: a file relative to the repository, the model a measurement loads."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def repo_path(path: Path) -> str:
    """A path as a report names it: relative to the repository where it lies inside."""
    path = path.resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def measured_model(ref: str | None = None) -> Path:
    """The GGUF a measurement loads: `ref` (a path or registry name, as a script's --model takes),
    else the default pair's target, resolved as the CLI resolves a model."""
    from specllama.models.registry import load_registry
    from specllama.models.resolve import resolve

    registry = load_registry()
    return resolve(ref or registry.pair(None).target, registry, None)


def write_report(out: str, title: str, script: str, argv: list[str] | None, head: str, lines: list[str],
                 data: dict, tail: str = "") -> None:
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cmd = f"python scripts/measure/{script} " + " ".join(argv if argv is not None else sys.argv[1:])
    Path(out + ".md").write_text(f"# {title} ({when})\n\nCommand: `{cmd}`\n\n{head}\n\n" + "\n".join(lines) + "\n"
                                 + (f"\n{tail}\n" if tail else ""))
    Path(out + ".json").write_text(json.dumps({"when": when, "about": head, **data}, indent=1) + "\n")


def show_and_write(out: str | None, title: str, script: str, argv: list[str] | None, head: str, lines: list[str],
                   data: dict) -> None:
    """Print a measurement's head and table; with an --out path, write OUT.md and OUT.json too."""
    print(head + "\n" + "\n".join(lines))
    if out:
        write_report(out, title, script, argv, head, lines, data)
