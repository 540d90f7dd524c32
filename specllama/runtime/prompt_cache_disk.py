"""The prompt cache's folder: entries kept across restarts, bounded in bytes, least recently used
first out.

Every entry file of the folder counts against the bound, whichever model made it (one folder,
one bound, as a user sizes it); a file's modification time is its last use. The files of this
model are indexed at start by their headers and tokens alone (prompt_cache_file.py); a file's
checksum is verified when it is read for use. A file that cannot be used (damaged, truncated,
another model's under this model's name) is said in one log line and removed, so it is said once.

Writes run on a thread of their own, off the engine's: copying a sequence's state out of
llama.cpp is the engine's (a fraction of a second for 20k tokens), writing hundreds of MB and
their checksum is not. At most WRITES_WAITING wait; beyond that an entry is kept in memory only.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from specllama.runtime import prompt_cache_file as pcf

WRITES_WAITING = 2
STALE_TMP_SECONDS = 3600  # a temporary file this old is a crashed write's


@dataclass
class Record:
    key: str
    tokens: np.ndarray
    nbytes: int
    ready: bool  # False while it is being written (counts as covered, cannot be read yet)


class DiskCache:
    def __init__(self, folder: Path, limit: int, identity: dict, prefix: str, log: Callable[[str], None]):
        self.folder = Path(folder)
        self.limit = limit
        self.identity = identity
        self.prefix = prefix  # this model's files: <prefix>-<tokens' hash>.slpc
        self.log = log
        self._lock = threading.Lock()
        self.records: dict[str, Record] = {}
        self._queue: queue.Queue = queue.Queue(WRITES_WAITING)
        self._thread: threading.Thread | None = None
        self.folder.mkdir(parents=True, exist_ok=True)
        self._scan()

    def path(self, key: str) -> Path:
        return self.folder / f"{key}{pcf.SUFFIX}"

    def key_for(self, tokens: np.ndarray) -> str:
        return f"{self.prefix}-{hashlib.sha256(tokens.astype(pcf.TOKEN).tobytes()).hexdigest()[:24]}"

    def _scan(self) -> None:
        now = time.time()
        for path in self.folder.iterdir():
            if path.name.endswith(".tmp"):
                try:
                    if now - path.stat().st_mtime > STALE_TMP_SECONDS:
                        path.unlink()
                except OSError:
                    pass
                continue
            if not (path.name.startswith(self.prefix + "-") and path.name.endswith(pcf.SUFFIX)):
                continue
            try:
                header, tokens = pcf.read_header(path, self.identity)
            except pcf.EntryError as e:
                self._drop(path, str(e))
                continue
            except OSError as e:
                self.log(f"prompt cache: {path.name}: unreadable ({e.strerror or e}); ignored")
                continue
            key = path.name[:-len(pcf.SUFFIX)]
            self.records[key] = Record(key, tokens, header.size(), True)

    def _drop(self, path: Path, reason: str) -> None:
        self.log(f"prompt cache: {path.name}: {reason}; ignored and removed")
        try:
            path.unlink()
        except OSError:
            pass

    # --- what the engine asks --------------------------------------------------------------------

    def snapshot(self) -> list[Record]:
        with self._lock:
            return list(self.records.values())

    def load(self, key: str) -> tuple[dict[str, pcf.Part], dict | None] | None:
        """The entry's parts (checked), or None, said in the log, when the file is gone or unusable."""
        path = self.path(key)
        try:
            parts = pcf.read_parts(path, self.identity)
        except pcf.EntryError as e:
            self._forget(key)
            self._drop(path, str(e))
            return None
        except OSError as e:
            self._forget(key)
            if not isinstance(e, FileNotFoundError):  # gone: another server's bound removed it
                self.log(f"prompt cache: {path.name}: unreadable ({e.strerror or e}); ignored")
            return None
        try:
            os.utime(path)  # its last use, for the bound
        except OSError:
            pass
        return parts

    def _forget(self, key: str) -> None:
        with self._lock:
            self.records.pop(key, None)

    def forget(self, key: str) -> None:
        """An entry llama.cpp refused although its file checked out (another layout): removed."""
        self._forget(key)
        self.path(key).unlink(missing_ok=True)

    def put(self, tokens: np.ndarray, parts: dict[str, pcf.Part], draft_identity: dict | None) -> bool:
        """Queue the entry for writing; False when it cannot be (larger than the bound, writes waiting)."""
        nbytes = sum(p.nbytes for p in parts.values())
        if nbytes > self.limit:
            return False
        key = self.key_for(tokens)
        with self._lock:
            if key in self.records:
                return True
            try:
                self._queue.put_nowait((key, parts, draft_identity))
            except queue.Full:
                return False
            self.records[key] = Record(key, tokens, nbytes, False)
            if self._thread is None:
                self._thread = threading.Thread(target=self._write_loop, name="specllama-prompt-cache", daemon=True)
                self._thread.start()
        return True

    # --- the writing thread ----------------------------------------------------------------------

    def _write_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            key, parts, draft_identity = item
            try:
                self._make_room(sum(p.nbytes for p in parts.values()))
                pcf.write(self.path(key), self.identity, parts, draft_identity)
                with self._lock:
                    if key in self.records:
                        self.records[key].ready = True
            except OSError as e:
                self._forget(key)
                self.log(f"prompt cache: could not write {self.path(key).name} ({e.strerror or e}); kept in memory only")
            finally:
                self._queue.task_done()

    def _make_room(self, incoming: int) -> None:
        """Remove the least recently used entry files of the folder (any model's) until `incoming`
        bytes more fit within the bound."""
        files = []
        for path in self.folder.glob(f"*{pcf.SUFFIX}"):
            try:
                st = path.stat()
            except OSError:
                continue
            files.append((st.st_mtime, st.st_size, path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):
            if total + incoming <= self.limit:
                break
            path.unlink(missing_ok=True)
            total -= size
            self._forget(path.name[:-len(pcf.SUFFIX)])

    def used(self) -> tuple[int, int]:
        """(this model's entries, bytes) on disk."""
        with self._lock:
            ready = [r for r in self.records.values() if r.ready]
            return len(ready), sum(r.nbytes for r in ready)

    def close(self, timeout: float) -> None:
        """Let the writes under way finish (up to `timeout` seconds: a stop must not hang on a disk)."""
        if self._thread is None:
            return
        deadline = time.monotonic() + timeout
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(max(0.0, deadline - time.monotonic()))
