"""The command line's shape: a table of command modules with one interface, no import cycles inside
cli/ (function-local imports included), and nothing in tui/ importing cli/ (a layer pointing up)."""

from __future__ import annotations

import ast
from pathlib import Path

from specllama.cli.main import COMMANDS

PACKAGE = Path(__file__).resolve().parents[2] / "specllama"


def imported_modules(path: Path) -> set[str]:
    """Every specllama module a file imports, at the top or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("specllama"):
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names if alias.name.startswith("specllama"))
    return names


def test_every_command_module_has_the_same_interface():
    for name, module in COMMANDS.items():
        assert isinstance(module.HELP, str) and module.HELP, name
        assert isinstance(module.DESCRIPTION, str) and module.DESCRIPTION, name
        assert callable(module.add_arguments) and callable(module.run), name


def test_no_import_cycles_inside_cli():
    modules = {f"specllama.cli.{p.stem}": p for p in (PACKAGE / "cli").glob("*.py") if p.stem != "__init__"}
    graph = {name: {m for m in imported_modules(path) if m in modules and m != name} for name, path in modules.items()}
    state: dict[str, str] = {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = "open"
        for nxt in graph[name]:
            assert state.get(nxt) != "open", "import cycle: " + " -> ".join(trail + [name, nxt])
            if nxt not in state:
                visit(nxt, trail + [name])
        state[name] = "done"

    for name in graph:
        if name not in state:
            visit(name, [])


def test_tui_does_not_import_cli():
    offenders = [str(p.relative_to(PACKAGE)) for p in (PACKAGE / "tui").rglob("*.py")
                 if any(m.startswith("specllama.cli") for m in imported_modules(p))]
    assert offenders == []
