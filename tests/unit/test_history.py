"""The chat history on a real SQLite file: round trips, migration, corrupt and locked files, and
the history screen driven with Pilot (fake runtime, as in test_tui.py)."""

from __future__ import annotations

import os
import sqlite3

import pytest
from textual.notifications import Notify

from specllama.tui.history import SCHEMA_VERSION, History, HistoryUnavailable, default_path, title_for
from specllama.tui.screens import HistoryScreen
from specllama.tui.widgets import ChatMessage
from tests.support.chat_app import ANSWER, FakeRuntime, app_with_history, run, send, wait_until

SIZE = (120, 36)


def fill(history: History) -> tuple[int, int]:
    a = history.new_conversation("primes in python", "T", "D", {"system": "be brief", "temperature": 0.0})
    history.add_message(a, "user", "write is_prime")
    answer = history.add_message(a, "assistant", "def is_", complete=False)
    history.update_message(answer, "def is_prime(n): ...", complete=True)
    b = history.new_conversation("sorting", "T", None, {})
    history.add_message(b, "user", "quicksort in C please")
    return a, b


def test_round_trip_rename_search_delete_export(tmp_path):
    path = tmp_path / "chats.sqlite3"
    history = History(path)
    a, b = fill(history)
    history.close()

    history = History(path)  # everything was on disk
    assert [c.title for c in history.conversations()] == ["sorting", "primes in python"]
    assert [(m.role, m.content, m.complete) for m in history.messages(a)] == [
        ("user", "write is_prime", True), ("assistant", "def is_prime(n): ...", True)]
    assert history.conversation(a).settings["system"] == "be brief"
    assert [c.id for c in history.conversations("QUICKSORT")] == [b]  # content, any case
    assert [c.id for c in history.conversations("primes")] == [a]  # title
    assert history.conversations("nothing like this") == []
    history.rename(a, "is_prime")
    assert history.conversation(a).title == "is_prime"
    exported = history.export_markdown(a, tmp_path / "out.md")
    text = exported.read_text()
    assert text.startswith("# is_prime") and "## system\n\nbe brief" in text and "def is_prime(n): ..." in text
    history.delete(b)
    assert [c.id for c in history.conversations()] == [a]
    assert history.db.execute("SELECT count(*) FROM messages").fetchone()[0] == 2  # b's messages went too
    assert history.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert history.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_export_defaults_to_the_title_in_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    history = History(tmp_path / "h.sqlite3")
    a, _ = fill(history)
    history.rename(a, "what/is: a prime?")
    assert history.export_markdown(a) == tmp_path / "whatis a prime.md"


def test_default_path_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("SPECLLAMA_DATA", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_path() == tmp_path / "xdg" / "specllama" / "chats.sqlite3"
    monkeypatch.setenv("SPECLLAMA_DATA", str(tmp_path / "mine"))
    assert default_path() == tmp_path / "mine" / "chats.sqlite3"


def test_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "h.sqlite3"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(HistoryUnavailable, match="newer specllama"):
        History(path)


def test_corrupt_and_locked_files_raise_one_clear_error(tmp_path):
    corrupt = tmp_path / "corrupt.sqlite3"
    corrupt.write_bytes(os.urandom(8192))
    with pytest.raises(HistoryUnavailable, match="corrupt.sqlite3"):
        History(corrupt)

    locked = tmp_path / "locked.sqlite3"
    History(locked).close()
    holder = sqlite3.connect(locked, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(HistoryUnavailable, match="locked"):
            History(locked, timeout=0.1)
    finally:
        holder.close()


def test_title_is_the_first_line_cut_short():
    assert title_for("  write\n is_prime  ") == "write is_prime"
    assert len(title_for("x" * 200)) == 60


# --- in the app ----------------------------------------------------------------------------------

def notices_hook(notices: list):
    return lambda m: notices.append(m.notification) if isinstance(m, Notify) else None


def test_every_turn_is_saved_as_it_happens_and_reopens(tmp_path):
    path = tmp_path / "chats.sqlite3"

    async def first_session():
        async with app_with_history(path, temperature=0.5, system="be brief").run_test(size=SIZE) as pilot:
            await send(pilot, "first question")
            await send(pilot, "second question")
            saved = History(path)
            [conv] = saved.conversations()
            assert conv.title == "first question" and conv.target == "Fake-Coder 1.5B" and conv.draft == "Fake-Coder 0.5B"
            assert conv.settings["temperature"] == 0.5 and conv.settings["system"] == "be brief"
            assert [(m.role, m.content, m.complete) for m in saved.messages(conv.id)] == [
                ("user", "first question", True), ("assistant", ANSWER, True),
                ("user", "second question", True), ("assistant", ANSWER, True)]
            saved.close()
    run(first_session)

    async def second_session():
        app = app_with_history(path)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: app.runtime is not None)
            await pilot.press("ctrl+l")
            assert isinstance(app.screen, HistoryScreen)
            await pilot.press("enter")
            await wait_until(pilot, lambda: len(app.query(ChatMessage)) == 4)
            assert [m["content"] for m in app.conversation.messages] == [
                "first question", ANSWER, "second question", ANSWER]
            assert app.conversation.system == "be brief" and app.settings.temperature == 0.5
            await send(pilot, "third")  # continues the same saved conversation
            saved = History(path)
            [conv] = saved.conversations()
            assert len(saved.messages(conv.id)) == 6
            # The engine was sent the whole restored conversation.
            assert "first question" in "".join(map(chr, app.runtime.engine.ctx.tokens))
            saved.close()
    run(second_session)


def test_the_answer_is_saved_while_it_streams(tmp_path):
    from tests.support.chat_app import MD_SCRIPT, GatedScript

    path = tmp_path / "chats.sqlite3"
    script = GatedScript(MD_SCRIPT, gate_at=3)

    async def scenario():
        app = app_with_history(path, FakeRuntime(script))
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: app.runtime is not None)
            app.ask("square?")
            other = History(path)  # another connection, as after a kill
            conv = other.conversations()[0].id
            await wait_until(pilot, lambda: len(other.messages(conv)) == 2 and other.messages(conv)[1].content)
            partial = other.messages(conv)[1]
            assert not partial.complete and "```python" in partial.content
            script.gate.set()
            await wait_until(pilot, lambda: not app.busy)
            assert other.messages(conv)[1].complete
            other.close()
    try:
        run(scenario)
    finally:
        script.gate.set()


def test_a_failed_answer_leaves_no_row(tmp_path):
    path = tmp_path / "chats.sqlite3"

    async def scenario():
        async with app_with_history(path, FakeRuntime(fail_at_step=2)).run_test(size=SIZE) as pilot:
            await send(pilot, "overflow please")
            saved = History(path)
            assert [saved.messages(c.id) for c in saved.conversations()] == [[]]
            saved.close()
    run(scenario)


def test_history_screen_renames_searches_exports_and_deletes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "chats.sqlite3"
    seed = History(path)
    a, b = fill(seed)
    seed.close()

    async def scenario():
        notices = []
        app = app_with_history(path)
        async with app.run_test(size=SIZE, message_hook=notices_hook(notices)) as pilot:
            await wait_until(pilot, lambda: app.runtime is not None)
            await pilot.press("f10")
            screen = app.screen
            assert isinstance(screen, HistoryScreen) and screen.selected == b  # newest first
            await pilot.press("slash", *"prime", "enter")
            assert screen.selected == a and screen.query_one("#list").option_count == 1
            await pilot.press("r", "ctrl+u", *"renamed", "enter")
            assert app.history.conversation(a).title == "renamed"
            await pilot.press("e", "enter")
            assert (tmp_path / "renamed.md").read_text().startswith("# renamed")
            assert any(str(tmp_path / "renamed.md") in n.message for n in notices)
            await pilot.press("d")
            assert app.history.conversations() != []  # the first d only asks
            await pilot.press("d")
            assert [c.id for c in app.history.conversations()] == [b]
            await pilot.press("escape")
            assert not isinstance(app.screen, HistoryScreen)
    run(scenario)


def test_corrupt_history_is_said_once_and_the_chat_runs(tmp_path):
    path = tmp_path / "chats.sqlite3"
    path.write_bytes(os.urandom(4096))

    async def scenario():
        notices = []
        app = app_with_history(path)
        async with app.run_test(size=SIZE, message_hook=notices_hook(notices)) as pilot:
            await send(pilot, "hi")
            await send(pilot, "again")
            assert app.last_summary.text == ANSWER and app.history is None
            warnings = [n for n in notices if "history" in (n.title or "") + n.message]
            assert len(warnings) == 1 and "chats.sqlite3" in warnings[0].message
    run(scenario)


def test_history_locked_mid_session_is_said_once(tmp_path):
    path = tmp_path / "chats.sqlite3"

    async def scenario():
        notices = []
        app = app_with_history(path)
        async with app.run_test(size=SIZE, message_hook=notices_hook(notices)) as pilot:
            await send(pilot, "hi")
            holder = sqlite3.connect(path, isolation_level=None, timeout=0)
            holder.execute("BEGIN EXCLUSIVE")
            app.history.db.execute("PRAGMA busy_timeout = 50")
            try:
                await send(pilot, "while locked")
                await send(pilot, "still locked")
            finally:
                holder.close()
            assert app.history is None and app.last_summary.text == ANSWER
            assert len([n for n in notices if "locked" in n.message]) == 1
    run(scenario)


def test_a_turn_on_other_models_renames_the_conversations_models(tmp_path):
    from specllama.tui.recorder import ConversationRecorder

    warnings: list[str] = []
    recorder = ConversationRecorder(tmp_path / "chats.sqlite3", warnings.append)
    recorder.open()
    recorder.save_question("hello", "Small 1.5B", "Draft 0.5B", {"models": {"target": "s", "draft": "d"}})
    recorder.save_answer("hi", complete=True)
    recorder.save_question("and now?", "Big 7B", None, {"models": {"target": "b", "draft": None}})
    recorder.save_answer("still here", complete=True)
    [info] = recorder.history.conversations()
    assert (info.target, info.draft) == ("Big 7B", None)  # the list shows what it runs on now
    assert info.settings["models"] == {"target": "b", "draft": None} and info.messages == 4
    assert "Big 7B" in recorder.history.export_markdown(info.id, tmp_path / "c.md").read_text()
    recorder.close()
    assert warnings == []
