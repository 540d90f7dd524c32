"""The tests' own filing: a test file sits in tests/unit, tests/integration or tests/real, imports what it
shares from tests/support and never from another test file, and tests/real holds exactly the tests
marked real_models (so `--ignore tests/real` and `-m "not real_models"` skip the same ones)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
FOLDERS = ("unit", "integration", "real")


def all_test_files() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def marks_real_models(path: Path) -> bool:
    """Whether the file marks a test (or, with pytestmark, all of them) real_models."""
    return any(isinstance(node, ast.Attribute) and node.attr == "real_models"
               for node in ast.walk(ast.parse(path.read_text())))


def test_every_test_file_is_in_one_of_the_three_folders():
    misplaced = [str(p.relative_to(TESTS)) for p in all_test_files() if p.parent.name not in FOLDERS
                 or p.parent.parent != TESTS]
    assert not misplaced, f"test files outside tests/{{{','.join(FOLDERS)}}}: {misplaced}"
    assert len(all_test_files()) > 100  # the finder finds the suite


def test_no_file_under_tests_imports_a_test_file():
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            if any(part.startswith("test_") for name in names if name.startswith("tests") for part in name.split(".")):
                offenders.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    assert not offenders, f"imports of a test file (share it from tests/support instead): {offenders}"


def test_tests_real_holds_exactly_the_real_models_tests():
    real = {str(p.relative_to(TESTS)) for p in all_test_files() if p.parent.name == "real"}
    marked = {str(p.relative_to(TESTS)) for p in all_test_files() if marks_real_models(p)}
    assert real and real == marked, {"in tests/real, unmarked": real - marked, "marked, elsewhere": marked - real}
