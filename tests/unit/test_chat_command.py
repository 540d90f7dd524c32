"""`specllama chat` outside the app: no terminal, a crash, saved settings checked, a history export
that never overwrites, a conversation whose settings cannot be read."""

from __future__ import annotations

import subprocess
import sys

import pytest

from specllama.cli.main import main
from tests.support.one_line import ENV, NEVER, REPO, one_error_line


@pytest.mark.parametrize("values, fragment", [
    ({"temperature": "hot"}, "temperature"), ({"max_tokens": 0}, "max tokens"), ({"k": 17}, "k must be"),
    ({"k": "7"}, "k must be"), ({"stop": 5}, "stop"), ({"seed": "x"}, "seed"), ({"drafter": 3}, "drafter"),
    ({"system": ["x"]}, "system"),
])
def test_saved_chat_settings_are_checked(values, fragment):
    from specllama.errors import SpecllamaError
    from specllama.tui.settings import ChatSettings

    with pytest.raises(SpecllamaError, match=fragment):
        ChatSettings.from_dict(values)


def test_chat_without_a_terminal_is_refused_at_once(tmp_path):
    cmd = [sys.executable, "-m", "specllama", "chat", "--target", str(tmp_path / NEVER)]
    done = subprocess.run(cmd, cwd=REPO, env=ENV, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1
    one_error_line(done.stderr, "needs a terminal")


def test_a_chat_that_crashed_does_not_exit_0(monkeypatch):
    import specllama.tui

    class CrashedApp:  # what Textual leaves after an exception it caught: a traceback shown, return_code 1
        unexpected_errors, load_failed, return_code = [], None, 1

        def __init__(self, *args, **kwargs):
            pass

        def run(self):
            pass

        def close_runtime(self):
            pass

    monkeypatch.setattr(specllama.tui, "ChatApp", CrashedApp)
    monkeypatch.setattr("specllama.cli.cmd_chat.chat_load_options", lambda args, resolved, reopen=None: None)
    monkeypatch.setattr("specllama.cli.cmd_chat.require_terminal", lambda: None)
    assert main(["chat"]) == 1


def test_a_history_export_never_overwrites_a_file(tmp_path, monkeypatch):
    from specllama.tui.history import History

    monkeypatch.chdir(tmp_path)
    history = History(tmp_path / "h.sqlite3")
    cid = history.new_conversation("a title", "T", None, {})
    history.add_message(cid, "user", "hello")
    (tmp_path / "a title.md").write_text("the user's notes\n")
    assert history.export_markdown(cid) == tmp_path / "a title-2.md"  # the default: a free name
    with pytest.raises(FileExistsError, match="already exists"):
        history.export_markdown(cid, tmp_path / "a title.md")
    assert (tmp_path / "a title.md").read_text() == "the user's notes\n"


@pytest.mark.parametrize("stored", ["{not json", "[1, 2]", "null"])
def test_a_conversation_with_unreadable_settings_still_lists(tmp_path, stored):
    import sqlite3

    from specllama.tui.history import History

    history = History(tmp_path / "h.sqlite3")
    cid = history.new_conversation("t", "T", None, {"temperature": 0.5})
    with sqlite3.connect(tmp_path / "h.sqlite3") as db:
        db.execute("UPDATE conversations SET settings = ? WHERE id = ?", (stored, cid))
    assert [(c.id, c.settings) for c in history.conversations()] == [(cid, {})]
