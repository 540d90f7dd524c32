"""The output file of a batch, local or on servers: one JSON line per finished prompt, durable as
soon as it is written.

The output file is the only state. Each record is written whole, flushed and fsynced before the
next prompt starts, so a crash, Ctrl-C or kill -9 loses at most the prompt in flight. A kill in the
middle of a write can leave a partial last line; `open_output` cuts it off before appending (so the
file stays valid JSONL) and the rerun does that prompt again. Ids already in the file are skipped.
Only lines this program wrote are ever cut: anything else in the file stops the run untouched.
One run at a time writes an output: `locked_output` holds an advisory lock for the whole run, so a
second batch on the same file is refused instead of answering every prompt again.
"""

from __future__ import annotations

import errno
import json
import os
import signal
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from specllama.batch.prompts_file import id_key
from specllama.errors import SpecllamaError


class BatchOutputError(SpecllamaError):
    """The output file exists but is not a file we can safely append to."""


class OutputLockedError(BatchOutputError):
    """Another process is writing this output file right now."""


class OutputWriteError(BatchOutputError):
    """A record could not be written (disk full, file size limit, I/O error)."""


def lock_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.name + ".lock")


@contextmanager
def locked_output(path: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` for the body: a second holder is refused with the first
    one's pid. The lock is flock(2) on a sidecar `OUT.lock` holding the pid; the kernel drops it when
    its process dies, so a lock file left by a killed run is simply taken over."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks here; run unlocked rather than not at all
        yield
        return
    lock = lock_path(path)
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise BatchOutputError(f"cannot create the lock file {lock}: {e.strerror or e}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise OutputLockedError(f"{path} is being written by another specllama run (pid {holder}); "
                                    "wait for it to finish or choose another -o") from None
        # The holder before us may have unlinked the file between our open and our lock: then we
        # hold a lock on a name nobody else sees, so start again on the current file.
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(lock))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        lock.unlink(missing_ok=True)  # while still locked, so no one can take a name about to vanish
        os.close(fd)


@dataclass
class OutputState:
    done: set[str]  # id keys already answered
    repaired: str | None = None  # what was fixed at the end of the file, if anything


# Every line this program writes is json.dumps of a dict whose first key is "id", so it starts
# with exactly these bytes. The torn-line repair cuts only a tail that starts like one of ours: a
# line of anything else (a prompt, someone's notes) is never ours to cut.
OUR_LINE_START = b'{"id": '
# A record of ours has these keys; a JSON line without them is someone else's data.
OUR_KEYS = frozenset({"id", "text", "finish_reason"})


def open_output(path: str | Path, *, inputs: Sequence[str | Path] = ()) -> OutputState:
    """Read what an earlier run wrote, repairing an interrupted last line; refuse anything else
    that is not a specllama output, rather than append to (or silently rewrite) a file we do not
    understand. `inputs` are files the run reads (the prompts file): never an output."""
    path = Path(path)
    for source in inputs:
        if _same_file(path, Path(source)):
            raise BatchOutputError(f"{path} is the prompts file: choose another output (-o), "
                                   "results are never written over their input")
    if not path.exists():
        return OutputState(set())
    data = path.read_bytes()
    *complete, tail = data.split(b"\n")  # tail: bytes after the last newline (b"" when none)
    done: set[str] = set()
    for number, raw in enumerate(complete, start=1):
        if not raw.strip():
            continue
        record = _record(raw)
        if record is None:
            raise BatchOutputError(
                f"{path} line {number} is not a specllama result; it is left alone: give -o a new "
                "file, or the output of an earlier run of this batch to resume it")
        done.add(id_key(record["id"]))
    repaired = None
    if tail.strip():
        record = _record(tail)
        # A torn record of ours is never whole JSON; a whole JSON line that is not ours is someone
        # else's (a prompts file whose last line lacks its newline).
        if record is None and (not tail.startswith(OUR_LINE_START) or _is_json(tail)):
            raise BatchOutputError(
                f"{path} ends with a line that specllama did not write; it is left alone: give -o a "
                "new file, or the output of an earlier run of this batch to resume it")
        with path.open("r+b") as f:
            if record is not None:  # whole record, only its newline missing
                f.seek(len(data))
                f.write(b"\n")
                done.add(id_key(record["id"]))
                repaired = "added the missing newline after the last record"
            else:
                f.truncate(len(data) - len(tail))
                repaired = f"dropped an incomplete last line ({len(tail)} bytes, an interrupted write); its prompt runs again"
            f.flush()
            os.fsync(f.fileno())
    return OutputState(done, repaired)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _is_json(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return True


def _record(raw: bytes) -> dict | None:
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return obj if isinstance(obj, dict) and OUR_KEYS <= obj.keys() else None


class OutputWriter:
    """Appends one record per line; each is on disk before `write` returns.

    Unbuffered writes on the descriptor: a failed write (a full disk) leaves nothing queued in a
    Python buffer to fail again at close, and at worst a partial line that the next run cuts."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as e:
            raise OutputWriteError(f"cannot open {self.path} for writing: {e.strerror or e}") from None

    def write(self, record: dict) -> None:
        data = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        # Ctrl-C or SIGTERM is held off until the line is on disk, so a polite stop never leaves
        # half a record; only a hard kill (or a full disk) can, and open_output repairs that.
        try:
            with _signals_deferred():
                view = memoryview(data)
                while view:
                    view = view[os.write(self._fd, view):]
                os.fsync(self._fd)
        except OSError as e:
            reason = {errno.ENOSPC: "the disk is full", errno.EFBIG: "the file size limit is reached",
                      errno.EDQUOT: "the disk quota is exceeded"}.get(e.errno, e.strerror or str(e))
            raise OutputWriteError(f"cannot write to {self.path}: {reason}; the results before it are kept, "
                                   "free some space and rerun the same command to finish") from None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@contextmanager
def _signals_deferred() -> Iterator[None]:
    if not hasattr(signal, "pthread_sigmask"):  # Windows
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)  # a pending signal is delivered here
