"""A script of scripts/measure imported fresh for a test: the scripts are not a package, and a module left in
sys.modules by one test would carry its globals (costs, vocabulary) into the next."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterator

MEASURE = Path(__file__).resolve().parents[2] / "scripts" / "measure"


def fresh_script(monkeypatch, name: str) -> Iterator[ModuleType]:
    """Yield scripts/measure/NAME.py imported anew (for a pytest fixture); forgotten again afterwards."""
    monkeypatch.syspath_prepend(str(MEASURE))
    sys.modules.pop(name, None)
    yield importlib.import_module(name)
    sys.modules.pop(name, None)
