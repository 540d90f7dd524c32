"""Loaded by Python at start-up when this folder is on PYTHONPATH (tests/integration/test_prepared_once.py puts
it there for a `specllama serve` subprocess): every draft policy and grammar guide the server builds
is written as a line "what class thread" to $SPECLLAMA_COUNT_LOG."""

import os

_log = os.environ.get("SPECLLAMA_COUNT_LOG")
if _log:
    from tests.support.construction_count import install

    def _write(what: str, name: str, thread: str) -> None:
        with open(_log, "a") as f:
            f.write(f"{what} {name} {thread}\n")

    install(_write)
