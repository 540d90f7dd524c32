"""The chat's everyday controls in Textual's pilot (issue 23): regenerate, edit and resend, recall
with ↑ / ↓, selecting any message to copy it, the ctrl and plain keys beside the F-keys, the
command palette, the saved theme and a first message given on the command line."""

from __future__ import annotations

from specllama.tui import ChatApp, ChatSettings, user_defaults
from specllama.tui.history import History
from specllama.tui.keys import CHAT_KEYS
from specllama.tui.screens import HelpScreen, SettingsScreen
from specllama.tui.widgets import ChatMessage, PromptInput
from tests.support.chat_app import ANSWER, SCRIPT, SIZE, FakeRuntime, chat_app, run, send, wait_until


def texts(app) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in app.query(ChatMessage)]


def test_regenerate_replaces_the_last_answer_on_screen_in_the_model_and_in_the_history(tmp_path):
    path = tmp_path / "chats.sqlite3"
    runtime = FakeRuntime()

    async def scenario():
        app = ChatApp(lambda progress, status: runtime, ChatSettings(drafter="model", temperature=0.7),
                      flush_interval=0, history_path=path)
        async with app.run_test(size=SIZE) as pilot:
            await send(pilot, "first")
            await send(pilot, "second")
            await pilot.press("ctrl+r")
            await wait_until(pilot, lambda: len(runtime.engine.configs) == 3 and not app.busy)
            assert texts(app) == [("user", "first"), ("assistant", ANSWER), ("user", "second"), ("assistant", ANSWER)]
            assert [m["role"] for m in app.conversation.messages] == ["user", "assistant", "user", "assistant"]
            # The regenerated answer was asked for with the conversation up to "second", not after the old answer.
            assert "".join(map(chr, runtime.engine.ctx.tokens)).count("<assistant>") == 2
            conversation_id = app.recorder.conversation_id
        history = History(path)
        stored = history.messages(conversation_id)
        assert [(m.role, m.content, m.complete) for m in stored] == [
            ("user", "first", True), ("assistant", ANSWER, True), ("user", "second", True), ("assistant", ANSWER, True)]
        history.close()
    run(scenario)


def test_regenerate_with_nothing_to_regenerate_or_while_answering_only_says_so():
    from textual.notifications import Notify

    async def scenario():
        notices = []
        # An answer far longer than the keys take (500 steps, 10 s), stopped with esc once they were
        # pressed: with 1.6 s of answer a loaded CI machine once finished it before the keys arrived.
        runtime = FakeRuntime(SCRIPT * 125, step_delay=0.02)
        hook = lambda m: notices.append(m.notification.message) if isinstance(m, Notify) else None  # noqa: E731
        async with chat_app(runtime).run_test(size=SIZE, message_hook=hook) as pilot:
            await wait_until(pilot, lambda: pilot.app.runtime is not None)
            await pilot.press("ctrl+r", "ctrl+e")
            assert runtime.engine.configs == [] and not pilot.app.query(ChatMessage)
            assert "no answer to regenerate yet" in notices and "no question to edit yet" in notices
            pilot.app.ask("long")
            await pilot.press("ctrl+r", "ctrl+e")
            assert pilot.app.busy and len(runtime.engine.configs) == 1
            assert notices.count("still answering: esc stops the answer") == 2
            await pilot.press("escape")
            await wait_until(pilot, lambda: not pilot.app.busy)
            assert len(runtime.engine.ks_seen) < len(SCRIPT) * 125  # stopped, not finished
            assert texts(pilot.app)[0] == ("user", "long") and len(texts(pilot.app)) == 2
    run(scenario)


def test_edit_last_puts_the_question_back_and_withdraws_its_turn(tmp_path):
    path = tmp_path / "chats.sqlite3"
    runtime = FakeRuntime()

    async def scenario():
        app = ChatApp(lambda progress, status: runtime, ChatSettings(drafter="model"), flush_interval=0,
                      history_path=path)
        async with app.run_test(size=SIZE) as pilot:
            await send(pilot, "first")
            await send(pilot, "secnod")
            app.prompt.value = "half typed"
            await pilot.press("ctrl+e")
            assert app.prompt.value == "secnod" and app.focused is app.prompt
            assert texts(app) == [("user", "first"), ("assistant", ANSWER)]
            assert [m["content"] for m in app.conversation.messages] == ["first", ANSWER]
            app.prompt.value = "second"
            await pilot.press("enter")
            await wait_until(pilot, lambda: not app.busy and len(app.query(ChatMessage)) == 4)
            assert texts(app)[2] == ("user", "second")
            conversation_id = app.recorder.conversation_id
            assert "half typed" in app.prompt.recall.entries  # set aside, one ↑ away
        history = History(path)
        assert [m.content for m in history.messages(conversation_id)] == ["first", ANSWER, "second", ANSWER]
        history.close()
    run(scenario)


def test_up_and_down_recall_earlier_prompts_and_give_back_the_draft():
    async def scenario():
        async with chat_app().run_test(size=SIZE) as pilot:
            await send(pilot, "one")
            await send(pilot, "two")
            prompt = pilot.app.query_one("#prompt", PromptInput)
            await pilot.press("d", "r", "a", "f", "t")
            await pilot.press("up")
            assert prompt.value == "two"
            await pilot.press("up")
            assert prompt.value == "one"
            await pilot.press("up")
            assert prompt.value == "one"  # the oldest stays
            await pilot.press("down")
            assert prompt.value == "two"
            await pilot.press("down")
            assert prompt.value == "draft"
            # Inside a message of several lines, ↑ moves the cursor as usual.
            prompt.value = "line one\nline two"
            await pilot.press("up")
            assert prompt.value == "line one\nline two" and prompt.cursor_location[0] == 0
    run(scenario)


def test_any_message_is_selected_with_the_keyboard_and_copied(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no clipboard tool: the app's own clipboard (OSC 52)

    async def scenario():
        async with chat_app().run_test(size=SIZE) as pilot:
            await send(pilot, "first")
            await send(pilot, "second question")
            await pilot.press("tab")
            assert pilot.app.focused is pilot.app.query(ChatMessage).last()
            await pilot.press("up", "enter")
            assert pilot.app.clipboard == "second question"
            await pilot.press("up", "up", "up", "y")  # stops at the first message
            assert pilot.app.clipboard == "first"
            await pilot.press("escape")
            assert pilot.app.focused is pilot.app.query_one("#prompt")
            await pilot.press("tab", "ctrl+n")  # the selected message goes: typing goes to the input again
            await pilot.press("h")
            assert pilot.app.focused is pilot.app.prompt and pilot.app.prompt.value == "h"
    run(scenario)


def test_plain_keys_type_in_the_input_and_act_when_a_message_is_selected():
    async def scenario():
        runtime = FakeRuntime()
        async with chat_app(runtime, k=4).run_test(size=SIZE) as pilot:
            await send(pilot, "hi")
            await pilot.press("d", "K", "T", "P")
            assert pilot.app.prompt.value == "dKTP"  # typed, not taken
            assert (pilot.app.settings.drafter, pilot.app.settings.k) == ("model", 4)
            pilot.app.prompt.value = ""
            await pilot.press("tab", "K", "K", "k", "T", "P", "d")
            s = pilot.app.settings
            assert (s.k, s.temperature, s.p_min, s.drafter) == (5, 0.1, 0.05, "none")
            await pilot.press("s")
            assert not pilot.app.panel.display
            await pilot.press("tab")  # back to the input
            assert pilot.app.focused is pilot.app.prompt
    run(scenario)


def test_ctrl_keys_open_help_and_settings_and_every_action_is_in_the_palette():
    async def scenario():
        async with chat_app().run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: pilot.app.runtime is not None)
            await pilot.press("ctrl+g")
            assert isinstance(pilot.app.screen, HelpScreen)
            await pilot.press("ctrl+g")
            assert not isinstance(pilot.app.screen, HelpScreen)
            await pilot.press("ctrl+t")
            assert isinstance(pilot.app.screen, SettingsScreen)
            await pilot.press("escape")
            titles = {c.title for c in pilot.app.get_system_commands(pilot.app.screen)}
            assert {b.description for b in CHAT_KEYS if b.action != "quit"} <= titles
    run(scenario)


def test_every_action_has_a_key_that_is_not_an_f_key():
    for binding in CHAT_KEYS:
        keys = [k.strip() for k in binding.key.split(",")]
        assert any(not (k.startswith("f") and k[1:].isdigit()) for k in keys), binding


def test_the_theme_is_saved_with_the_chat_defaults_and_comes_back(tmp_path):
    path = tmp_path / "chat.toml"
    user_defaults.save(ChatSettings(temperature=0.3), path)

    async def scenario():
        app = ChatApp(lambda progress, status: FakeRuntime(), defaults_path=path)
        async with app.run_test(size=SIZE) as pilot:
            pilot.app.theme = "nord"
            await pilot.pause()
        saved = user_defaults.load(path)
        assert saved["theme"] == "nord" and saved["temperature"] == 0.3  # the settings stay
        user_defaults.save(ChatSettings(temperature=0.5), path)  # saving settings keeps the theme
        assert user_defaults.theme(user_defaults.load(path)) == "nord"
        again = ChatApp(lambda progress, status: FakeRuntime(), theme="nord", defaults_path=path)
        async with again.run_test(size=SIZE) as pilot:
            assert pilot.app.theme == "nord"
    run(scenario)


def test_a_first_message_is_sent_once_the_models_are_loaded():
    async def scenario():
        runtime = FakeRuntime()
        app = ChatApp(lambda progress, status: runtime, ChatSettings(drafter="model"), flush_interval=0,
                      first_message="  hello there ")
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: app.last_summary is not None and not app.busy)
            assert texts(app) == [("user", "hello there"), ("assistant", ANSWER)]
    run(scenario)


def test_after_a_failed_answer_regenerate_and_edit_keep_the_screen_matching_the_conversation():
    async def scenario():
        runtime = FakeRuntime()
        async with chat_app(runtime).run_test(size=SIZE) as pilot:
            await send(pilot, "ok")
            runtime.engine.fail_at_step = 2
            await send(pilot, "bad")
            assert len(pilot.app.query(ChatMessage)) == 4  # the failed turn stays on screen, marked
            runtime.engine.fail_at_step = None
            await pilot.press("ctrl+r")
            await wait_until(pilot, lambda: not pilot.app.busy and len(runtime.engine.configs) == 3)
            assert texts(pilot.app) == [("user", "ok"), ("assistant", ANSWER)]
            await pilot.press("ctrl+e")
            await pilot.pause()
            assert texts(pilot.app) == [] and pilot.app.conversation.messages == []
            assert pilot.app.prompt.value == "ok"
    run(scenario)


def test_a_conversation_reopened_at_the_start_is_regenerated_in_place(tmp_path):
    path = tmp_path / "chats.sqlite3"
    history = History(path)
    cid = history.new_conversation("kept", "Fake-Coder 1.5B", None, {"temperature": 0.5})
    history.add_message(cid, "user", "old question")
    history.add_message(cid, "assistant", "old answer")
    history.close()

    async def scenario():
        runtime = FakeRuntime()
        app = ChatApp(lambda progress, status: runtime, ChatSettings(drafter="model"), flush_interval=0,
                      history_path=path, reopen=cid)  # as `specllama chat --conversation ID` starts it
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: app.runtime is not None and len(app.query(ChatMessage)) == 2)
            assert texts(app) == [("user", "old question"), ("assistant", "old answer")]
            assert app.settings.temperature == 0.5
            await pilot.press("up")
            assert app.prompt.value == "old question"  # its questions are in the recall list
            app.prompt.value = ""
            await pilot.press("ctrl+r")
            await wait_until(pilot, lambda: not app.busy and len(runtime.engine.configs) == 1)
            assert texts(app) == [("user", "old question"), ("assistant", ANSWER)]
        again = History(path)
        assert [(m.role, m.content) for m in again.messages(cid)] == [("user", "old question"), ("assistant", ANSWER)]
        again.close()
    run(scenario)


def test_a_theme_is_not_saved_over_a_defaults_file_it_cannot_write_back(tmp_path):
    import pytest

    from specllama.tui.user_defaults import UserDefaultsError, save_theme

    path = tmp_path / "chat.toml"
    path.write_text("temperature = 0.2\n[extra]\nnote = 'kept'\n")
    with pytest.raises(UserDefaultsError, match="theme is not saved"):
        save_theme("nord", path)
    assert "[extra]" in path.read_text()  # untouched
