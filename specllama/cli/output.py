"""Writing to stdout when stdout may be closed (`>&-`), full (a disk under `>`) or cut short (`| head`)."""

from __future__ import annotations

import os
import sys

from specllama.errors import SpecllamaError


class StdoutClosedError(SpecllamaError):
    """Standard output cannot be written: closed (`>&-`) or failing (a full disk under `>`)."""


def check_stdout() -> None:
    if sys.stdout is None:  # started with stdout closed (`>&-`): say so before loading anything
        raise StdoutClosedError("stdout is closed: there is nowhere to write the output")


def emit(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise  # `| head` took what it wanted: main() ends quietly
    except (OSError, ValueError, AttributeError) as e:  # closed (>&-: stdout is None or its fd is bad)
        reason = getattr(e, "strerror", None) or str(e)
        raise StdoutClosedError(f"cannot write the output to stdout ({reason})") from None


def quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's flush at exit does not fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass
    sys.stdout = open(os.devnull, "w")
