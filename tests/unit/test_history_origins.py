"""A reopened answer keeps its speculation colours: origins are saved as runs with the message
(schema 2), and a schema-1 file is migrated in place. Fake runtime, real SQLite files."""

from __future__ import annotations

import sqlite3

from specllama.tui.history import History, _v1, origin_runs, segments_from_runs
from specllama.tui.widgets import ChatMessage
from tests.support.chat_app import SCRIPT, app_with_history, origin_per_char, run, send, wait_until

SIZE = (100, 32)


def test_runs_merge_neighbours_and_round_trip():
    segments = [("def", "draft"), (" is", "draft"), ("_prime", "target"), ("", "bonus"), ("!", "bonus")]
    runs = origin_runs(segments)
    assert runs == [[6, "draft"], [6, "target"], [1, "bonus"]]
    text = "".join(t for t, _ in segments)
    assert origin_per_char(segments_from_runs(text, runs)) == origin_per_char(segments)
    assert segments_from_runs(text, [[3, "draft"]]) == [(text, "")]  # do not add up: uncoloured, not wrong
    assert segments_from_runs(text, None) == [(text, "")]


def test_a_schema_1_file_is_migrated_and_keeps_its_rows(tmp_path):
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    _v1(db)
    db.execute("PRAGMA user_version = 1")
    db.execute("INSERT INTO conversations VALUES (1, 't', 0, 0, NULL, NULL, '{}')")
    db.execute("INSERT INTO messages VALUES (1, 1, 'assistant', 'old answer', 1, 0)")
    db.commit()
    db.close()
    history = History(path)
    [message] = history.messages(1)
    assert message.content == "old answer" and message.origins is None
    assert message.segments() == [("old answer", "")]
    history.update_message(1, "ab", True, [[1, "draft"], [1, "target"]])
    assert history.messages(1)[0].segments() == [("a", "draft"), ("b", "target")]
    history.close()


def test_reopened_answer_is_coloured_by_origin(tmp_path):
    path = tmp_path / "chats.sqlite3"

    async def first():
        async with app_with_history(path).run_test(size=SIZE) as pilot:
            await send(pilot, "q")
    run(first)

    async def second():
        app = app_with_history(path)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: app.runtime is not None)
            await pilot.press("ctrl+l")
            await pilot.press("enter")
            await wait_until(pilot, lambda: len(app.query(ChatMessage)) == 2)
            answer = [m for m in app.query(ChatMessage) if m.role == "assistant"][0]
            assert origin_per_char(answer.segments) == origin_per_char([s for step in SCRIPT for s in step])
    run(second)
