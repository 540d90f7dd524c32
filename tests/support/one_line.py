"""What the command-line tests share: the repository's root, an environment that imports this
checkout, and the check that a user's mistake is one error line (never a traceback)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
NEVER = "never-loaded.gguf"  # a model path that must not be reached: the mistake is found first


def one_error_line(err: str, *fragments: str) -> str:
    """The one error line; a usage mistake may print the command's usage first, as argparse does."""
    lines = err.strip().splitlines()
    if lines and lines[0].startswith("usage: "):
        lines = [ln for ln in lines[1:] if not ln.startswith(" ")]
    assert len(lines) == 1 and lines[0].startswith("specllama: error: "), err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]
