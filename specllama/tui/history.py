"""Conversations that last: every chat saved as it happens, in one SQLite file.

Where: `$SPECLLAMA_DATA/chats.sqlite3` if set, else in the platform's data folder (specllama.dirs:
~/.local/share/specllama/ on Linux, ~/Library/Application Support/specllama/ on macOS).
WAL mode: a write (one per answer flush, ~10 a second at most) does not block readers and costs
one append to the log; `synchronous=NORMAL` keeps the database consistent across a crash and
loses at most the last transactions on power loss, which for a chat is the last flush. The
schema's version lives in `PRAGMA user_version`; `migrate` brings an older file up to date one
step at a time, so a newer specllama never needs the user to delete history.

Any failure to open or write (a corrupt file, a database locked by another program) raises
HistoryUnavailable: the app says so once and chats on without history.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from specllama.dirs import data_dir
from specllama.errors import SpecllamaError

FILE_NAME = "chats.sqlite3"


class HistoryUnavailable(SpecllamaError):
    """The history database cannot be used (corrupt, locked, unwritable); `reason` says why."""

    def __init__(self, message: str, reason: str = ""):
        super().__init__(message)
        self.reason = reason or message


def default_path() -> Path:
    return data_dir() / FILE_NAME


def _v1(db: sqlite3.Connection) -> None:
    db.executescript("""
        CREATE TABLE conversations (
            id INTEGER PRIMARY KEY,
            title TEXT NOT NULL,
            created REAL NOT NULL,
            updated REAL NOT NULL,
            target TEXT,            -- the model pair the conversation was held with
            draft TEXT,
            settings TEXT NOT NULL  -- JSON of the chat settings (system prompt, sampling, K ...)
        );
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            complete INTEGER NOT NULL DEFAULT 1,  -- 0 while an answer streams (or if it was killed)
            created REAL NOT NULL
        );
        CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
    """)


def _v2(db: sqlite3.Connection) -> None:
    # Where each piece of an answer came from (accepted draft, target, bonus), so a reopened answer
    # keeps its colours: JSON runs [[characters, origin], ...], a few hundred bytes per answer.
    db.execute("ALTER TABLE messages ADD COLUMN origins TEXT")


# MIGRATIONS[n] takes a database at version n to n + 1.
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_v1, _v2]
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(db: sqlite3.Connection) -> None:
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise HistoryUnavailable(f"the chat history was written by a newer specllama (schema {version})")
    for step in range(version, SCHEMA_VERSION):
        with db:  # each step and its version number commit together
            MIGRATIONS[step](db)
            db.execute(f"PRAGMA user_version = {step + 1}")


@dataclass(frozen=True)
class ConversationInfo:
    id: int
    title: str
    updated: float
    target: str | None  # display names (GGUF general.name), as the list and exports show them
    draft: str | None
    settings: dict  # ChatSettings.as_dict(), plus "models": {"target", "draft"} as registry names when known
    messages: int


@dataclass(frozen=True)
class StoredMessage:
    id: int
    role: str
    content: str
    complete: bool
    origins: list | None = None  # runs [[characters, origin], ...]; None: not kept (a question, an old answer)

    def segments(self) -> list[tuple[str, str]]:
        """The text as (piece, origin) segments: coloured by origin where that was kept."""
        return segments_from_runs(self.content, self.origins)


def origin_runs(segments) -> list[list]:
    """[(text, origin), ...] -> [[characters, origin], ...] with neighbours of one origin merged."""
    runs: list[list] = []
    for text, origin in segments:
        if runs and runs[-1][1] == origin:
            runs[-1][0] += len(text)
        elif text:
            runs.append([len(text), origin])
    return runs


def segments_from_runs(text: str, runs: list | None) -> list[tuple[str, str]]:
    """The inverse of origin_runs; runs that do not add up to the text are ignored (uncoloured)."""
    if not text:
        return []
    if not runs or sum(n for n, _ in runs) != len(text):
        return [(text, "")]
    segments, at = [], 0
    for n, origin in runs:
        segments.append((text[at:at + n], origin))
        at += n
    return segments


def _unavailable(path: Path, e: Exception) -> HistoryUnavailable:
    what = "locked by another program" if "locked" in str(e) else str(e)
    return HistoryUnavailable(f"chat history {path}: {what}; chatting without history", f"chat history {path}: {what}")


class History:
    """One connection, used from the UI thread only (writes are small and WAL makes them cheap)."""

    def __init__(self, path: Path | None = None, timeout: float = 2.0):
        self.path = Path(path) if path is not None else default_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
        except (OSError, sqlite3.Error) as e:
            raise _unavailable(self.path, e) from None
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            migrate(self.db)
            self.db.execute("SELECT count(*) FROM conversations").fetchone()
        except sqlite3.Error as e:  # "file is not a database", "database is locked"
            self.db.close()
            raise _unavailable(self.path, e) from None

    def _run(self, sql: str, params: tuple = ()) -> sqlite3.Cursor:
        try:
            with self.db:
                return self.db.execute(sql, params)
        except sqlite3.Error as e:
            raise _unavailable(self.path, e) from None

    def close(self) -> None:
        self.db.close()

    # --- writing as the chat goes --------------------------------------------------------------

    def new_conversation(self, title: str, target: str | None, draft: str | None, settings: dict) -> int:
        now = time.time()
        return self._run("INSERT INTO conversations (title, created, updated, target, draft, settings) "
                         "VALUES (?, ?, ?, ?, ?, ?)",
                         (title, now, now, target, draft, json.dumps(settings))).lastrowid

    def add_message(self, conversation: int, role: str, content: str, complete: bool = True) -> int:
        now = time.time()
        cur = self._run("INSERT INTO messages (conversation_id, role, content, complete, created) VALUES (?, ?, ?, ?, ?)",
                        (conversation, role, content, int(complete), now))
        self._run("UPDATE conversations SET updated = ? WHERE id = ?", (now, conversation))
        return cur.lastrowid

    def update_message(self, message: int, content: str, complete: bool, origins: list | None = None) -> None:
        self._run("UPDATE messages SET content = ?, complete = ?, origins = ? WHERE id = ?",
                  (content, int(complete), json.dumps(origins) if origins is not None else None, message))

    def delete_message(self, message: int) -> None:
        self._run("DELETE FROM messages WHERE id = ?", (message,))

    def set_settings(self, conversation: int, settings: dict, target: str | None, draft: str | None) -> None:
        """The settings and models of the latest turn: after a model switch the list, the export
        and a reopen name the models the conversation now runs on."""
        self._run("UPDATE conversations SET settings = ?, target = ?, draft = ? WHERE id = ?",
                  (json.dumps(settings), target, draft, conversation))

    # --- the history screen --------------------------------------------------------------------

    def conversations(self, search: str = "") -> list[ConversationInfo]:
        """Newest first; `search` matches the title or any message's text (case-insensitive)."""
        like = f"%{search}%"
        rows = self._run(
            "SELECT c.id, c.title, c.updated, c.target, c.draft, c.settings, "
            "  (SELECT count(*) FROM messages m WHERE m.conversation_id = c.id) "
            "FROM conversations c WHERE ? = '' OR c.title LIKE ? OR EXISTS "
            "  (SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND m.content LIKE ?) "
            "ORDER BY c.updated DESC, c.id DESC", (search, like, like)).fetchall()
        return [ConversationInfo(r[0], r[1], r[2], r[3], r[4], _settings(r[5]), r[6]) for r in rows]

    def conversation(self, conversation: int) -> ConversationInfo:
        for info in self.conversations():
            if info.id == conversation:
                return info
        raise KeyError(conversation)

    def messages(self, conversation: int) -> list[StoredMessage]:
        rows = self._run("SELECT id, role, content, complete, origins FROM messages WHERE conversation_id = ? "
                         "ORDER BY id", (conversation,)).fetchall()
        return [StoredMessage(r[0], r[1], r[2], bool(r[3]), _runs(r[4])) for r in rows]

    def rename(self, conversation: int, title: str) -> None:
        self._run("UPDATE conversations SET title = ? WHERE id = ?", (title, conversation))

    def delete(self, conversation: int) -> None:
        self._run("DELETE FROM conversations WHERE id = ?", (conversation,))  # messages cascade

    def export_markdown(self, conversation: int, path: Path | None = None) -> Path:
        """Writes the conversation as Markdown: `<title>.md` in the current directory by default (a
        free name: `<title>-2.md` when that exists). An existing file is never overwritten."""
        info = self.conversation(conversation)
        path = Path(path) if path is not None else free_export_path(info.title)
        try:
            with open(path, "x", encoding="utf-8") as f:  # "x": fails if the file exists
                f.write(to_markdown(info, self.messages(conversation)))
        except FileExistsError:
            raise FileExistsError(f"{path} already exists; give another name") from None
        return path.resolve()


def free_export_path(title: str, folder: Path | None = None) -> Path:
    """`<title>.md` in `folder` (the current directory), or `<title>-N.md` for the first N free."""
    folder = folder or Path.cwd()
    stem = safe_file_name(title)
    path, n = folder / f"{stem}.md", 1
    while path.exists():
        n += 1
        path = folder / f"{stem}-{n}.md"
    return path


def _settings(stored: str | None) -> dict:
    """A row's settings; {} for one this version cannot read (hand-edited, or cut by a crash):
    the list still opens, and reopening it keeps the current settings."""
    try:
        settings = json.loads(stored) if stored else {}
    except (ValueError, RecursionError):
        return {}
    return settings if isinstance(settings, dict) else {}


def _runs(stored: str | None) -> list | None:
    try:
        runs = json.loads(stored) if stored else None
    except ValueError:
        return None
    ok = isinstance(runs, list) and all(isinstance(r, list) and len(r) == 2 and isinstance(r[0], int) for r in runs)
    return runs if ok else None


def title_for(first_message: str, width: int = 60) -> str:
    line = " ".join(first_message.split())
    return line if len(line) <= width else line[:width - 1] + "…"


def safe_file_name(title: str) -> str:
    name = re.sub(r"[^\w.\- ]+", "", title).strip().strip(".")[:80]
    return name or "conversation"


def to_markdown(info: ConversationInfo, messages: list[StoredMessage]) -> str:
    models = info.target + (f" ← {info.draft}" if info.draft else "") if info.target else "unknown models"
    lines = [f"# {info.title}", "", f"*{models} · {time.strftime('%Y-%m-%d %H:%M', time.localtime(info.updated))}*", ""]
    system = info.settings.get("system")
    if system:
        lines += ["## system", "", system, ""]
    for m in messages:
        heading = "you" if m.role == "user" else "assistant" + ("" if m.complete else " (unfinished)")
        lines += [f"## {heading}", "", m.content, ""]
    return "\n".join(lines)
