"""Output paths checked before any work: a benchmark that runs for minutes and then cannot write
its results, or a batch that loads models and then cannot open its output, loses the user's time.
"""

from __future__ import annotations

import os
from pathlib import Path

from specllama.errors import SpecllamaError, UsageError


class OutputPathError(SpecllamaError):
    """An output path that cannot be written (a directory, a missing folder, a read-only file)."""


def check_writable(path: str | Path, what: str) -> Path:
    """Raise OutputPathError (naming `what`, e.g. "--json") unless `path` can be written: an
    existing file we may append to, or a new name in an existing, writable folder. Nothing is
    created or changed."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise OutputPathError(f"{what} {path} is a directory: give a file name")
    if path.exists():
        try:  # open for append, writing nothing: the only honest test (root ignores mode bits)
            with open(path, "ab"):
                pass
        except OSError as e:
            raise OutputPathError(f"{what} {path} cannot be written: {e.strerror or e}") from None
        return path
    if path.is_symlink():
        raise OutputPathError(f"{what} {path} is a dangling symlink")
    folder = path.parent
    if not folder.exists():
        raise OutputPathError(f"{what} {path}: the folder {folder} does not exist")
    if not folder.is_dir():
        raise OutputPathError(f"{what} {path}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids):
        raise OutputPathError(f"{what} {path}: cannot create files in {folder} (permission denied)")
    return path


def same_path(a: str | Path, b: str | Path) -> bool:
    """Whether two spellings name one file: the same resolved path (symlinks followed), or, for
    files that exist, the same inode (hard links)."""
    a, b = Path(a).expanduser(), Path(b).expanduser()
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist yet
        return False


class ClashingOutputsError(OutputPathError, UsageError):
    """Two of the command line's paths name one file where one is written: a usage mistake."""


def refuse_clashing_outputs(outputs: list[tuple[str, str | Path]], inputs: list[tuple[str, str | Path]]) -> None:
    """Raise ClashingOutputsError when an output (flag, path) is one of the inputs, or two outputs are one
    file: the second write would destroy the input or the first output."""
    for n, (flag, path) in enumerate(outputs):
        for in_flag, source in inputs:
            if same_path(path, source):
                raise ClashingOutputsError(f"{flag} {path} is the {in_flag} file: choose another name, "
                                      "results are never written over their input")
        for other_flag, other in outputs[n + 1:]:
            if same_path(path, other):
                raise ClashingOutputsError(f"{flag} and {other_flag} name the same file ({path}): "
                                      "one would overwrite the other; give each its own name")
