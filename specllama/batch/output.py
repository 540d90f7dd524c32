"""The output file of a batch, local or on servers: one JSON line per finished prompt, durable as
soon as it is written.

The output file is the only state. Each record is written whole, flushed and fsynced before the
next prompt starts, so a crash, Ctrl-C or kill -9 loses at most the prompt in flight. A kill in the
middle of a write can leave a partial last line; `open_output` cuts it off before appending (so the
file stays valid JSONL) and the rerun does that prompt again. Ids already in the file are skipped.
Only lines this program wrote are ever cut: anything else in the file stops the run untouched.
One run at a time writes an output: `locked_output` holds an advisory lock on the output file itself
for the whole run, so a second batch on the same file (by any name) is refused instead of answering
every prompt again.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
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


@contextmanager
def locked_output(path: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on the output file for the body: a second holder is refused with the
    first one's pid. The lock is flock(2) on the output file itself (created empty when missing,
    removed again at the end if still empty), so every spelling of it (a symlink, a hard link, a
    relative path) meets the same lock, and no sidecar file is ever created or written: a name
    beside the output may hold the user's data. The kernel drops the lock when its process dies."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks here; run unlocked rather than not at all
        yield
        return
    path = Path(path)
    while True:
        _refuse_special_file(path)
        created = not path.exists()
        try:  # O_NONBLOCK: a FIFO swapped in after the check must not block the open
            fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as e:
            raise BatchOutputError(f"cannot open {path}: {e.strerror or e}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            _refuse_special_file(path)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _flock_holder(os.fstat(fd).st_ino)
            os.close(fd)
            raise OutputLockedError(f"{path} is being written by another specllama run (pid {holder}); "
                                    "wait for it to finish or choose another -o") from None
        # The holder before us may have removed the (empty) file between our open and our lock:
        # then we hold a lock on a file nobody else sees, so start again on the current one.
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        yield
    finally:
        try:
            if created and os.fstat(fd).st_size == 0 and os.path.samestat(os.fstat(fd), os.stat(path)):
                path.unlink()  # while still locked: a run that wrote nothing leaves nothing behind
        except OSError:
            pass
        os.close(fd)


def _refuse_special_file(path: Path) -> None:
    """An output is read back (to resume) and appended to: only a regular file can be. A pipe,
    /dev/stdout or /dev/full would hang the read or fill memory with zeros."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as e:
        raise BatchOutputError(f"cannot use {path} as the output: {e.strerror or e}") from None
    if not stat.S_ISREG(mode):
        raise BatchOutputError(f"{path} is not a regular file (a device, pipe or folder): the output must be "
                               "a file, which a rerun reads back to resume")


def _flock_holder(inode: int) -> str:
    """The pid holding a flock on this inode, from /proc/locks (Linux); "unknown" elsewhere."""
    try:
        with open("/proc/locks") as f:
            for line in f:
                fields = line.split()  # "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234567 0 EOF"
                if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5].rsplit(":", 1)[-1] == str(inode):
                    return fields[4]
    except OSError:
        pass
    return "unknown"


@dataclass
class OutputState:
    done: set[str]  # id keys already answered
    repaired: str | None = None  # what was fixed at the end of the file, if anything
    prompts: dict[str, object] = field(default_factory=dict)  # id key -> the prompt its record holds

    def add(self, record: dict) -> None:
        key = id_key(record["id"])
        self.done.add(key)
        if "prompt" in record:
            self.prompts[key] = record["prompt"]


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
    _refuse_special_file(path)
    if not path.exists():
        return OutputState(set())
    try:
        data = path.read_bytes()
    except OSError as e:
        raise BatchOutputError(f"cannot read {path}: {e.strerror or e}") from None
    *complete, tail = data.split(b"\n")  # tail: bytes after the last newline (b"" when none)
    state = OutputState(set())
    for number, raw in enumerate(complete, start=1):
        if not raw.strip():
            continue
        record = _record(raw)
        if record is None:
            raise BatchOutputError(
                f"{path} line {number} is not a specllama result; it is left alone: give -o a new "
                "file, or the output of an earlier run of this batch to resume it")
        state.add(record)
    if tail.strip():
        record = _record(tail)
        # A torn record of ours is never whole JSON; a whole JSON line that is not ours is someone
        # else's (a prompts file whose last line lacks its newline).
        if record is None and (not tail.startswith(OUR_LINE_START) or _is_json(tail)):
            raise BatchOutputError(
                f"{path} ends with a line that specllama did not write; it is left alone: give -o a "
                "new file, or the output of an earlier run of this batch to resume it")
        state.repaired = _repair_tail(path, len(data), tail, record)
        if record is not None:
            state.add(record)
    return state


def _repair_tail(path: Path, size: int, tail: bytes, record: dict | None) -> str:
    """Add the missing newline after a whole last record, or cut a torn one; what was done."""
    try:
        with path.open("r+b") as f:
            if record is not None:
                f.seek(size)
                f.write(b"\n")
                done = "added the missing newline after the last record"
            else:
                f.truncate(size - len(tail))
                done = f"dropped an incomplete last line ({len(tail)} bytes, an interrupted write); its prompt runs again"
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:  # a full disk, an append-only file: nothing else in the file was touched
        raise BatchOutputError(f"cannot repair the end of {path} (an interrupted last record): "
                               f"{e.strerror or e}; free some space or fix its permissions and rerun") from None
    return done


def refuse_changed_prompts(path: str | Path, items: Sequence, state: OutputState) -> None:
    """Resuming matches prompts by id; a record whose id is now another prompt's (a line inserted
    into a plain-text file, whose ids are line numbers) would leave that prompt unanswered and
    answer another twice. Records hold their prompt, so that is caught before anything runs."""
    changed = [item for item in items
               if id_key(item.id) in state.done and state.prompts.get(id_key(item.id), item.prompt) != item.prompt]
    if changed:
        first = changed[0]
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise BatchOutputError(
            f"{path} answers id {first.id!r} with another prompt than line {first.line} now holds{more}: the "
            "prompts file changed since that run (plain-text ids are line numbers); restore it, or give -o a new file")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _is_json(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except (ValueError, RecursionError):  # ValueError: bad JSON, bad UTF-8, a 5000-digit number
        return False
    return True


def _record(raw: bytes) -> dict | None:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not (isinstance(obj, dict) and OUR_KEYS <= obj.keys()) or isinstance(obj["id"], bool) \
            or not isinstance(obj["id"], (str, int)):
        return None
    return obj


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
            with signals_deferred():
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
def signals_deferred() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the body is done (nesting is fine): a record is written whole,
    and it and the count of records written change together, so a second signal cannot leave the
    summary a line short of the file.

    Held by Python handlers that only note the signal, not by the thread's signal mask: a signal
    is often delivered to another thread (a progress bar's, a test server's), and Python then runs
    its handler in the main thread at once, whatever the main thread's mask says."""
    if threading.current_thread() is not threading.main_thread():  # handlers are the main thread's
        yield
        return
    pending: list[int] = []
    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(signum)
        if handler is not None:  # None: a handler installed outside Python, left alone
            previous[signum] = signal.signal(signum, lambda n, frame: pending.append(n))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if pending:
            signal.raise_signal(pending[0])  # to the handler it was meant for, now
