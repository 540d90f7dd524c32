"""The chat app, driven with Pilot.

A scripted fake runtime stands where the real one goes (the app is given a function that builds
it), so these tests need no llama.cpp (the real pair: tests/real/test_real_chat.py). Snapshots are plain
text of the rendered screen (tests/snapshots/*.txt): reviewable in a diff, unlike SVG; colours are
checked on the message content instead. SPECLLAMA_UPDATE_SNAPSHOTS=1 rewrites them.
"""

from __future__ import annotations

import threading

import pytest
from textual.notifications import Notify

from specllama.decoding.cost.online import StepCosts
from specllama.decoding.events import DoneEvent, StepEvent, Summary, TokenEvent
from specllama.errors import ModelFileError, SpecllamaError
from specllama.tui import ChatApp, ChatSettings
from specllama.tui.capture import screen_text
from specllama.tui.screens import HelpScreen
from specllama.tui.streaming import ReplyChunk, stream_reply
from specllama.tui.widgets import ORIGIN_STYLES, ChatMessage
from tests.support.chat_app import (
    ANSWER,
    SCRIPT,
    SIZE,
    TALL,
    FakeRuntime,
    assert_snapshot,
    chat_app,
    origin_per_char,
    run,
    send,
    stopped_with_escape,
    wait_until,
)

# --- streaming without a terminal ----------------------------------------------------------------

def test_stream_reply_batches_text_and_keeps_origins():
    def events():
        for step in SCRIPT:
            for text, origin in step:
                yield TokenEvent(7, text, origin)
            yield StepEvent(4, 4, 2, 0.01, 0.03, 0.0)
        yield DoneEvent("", Summary(tokens=10, text=ANSWER))

    posted = []
    ticks = iter(range(1000))  # a clock that advances 1 ms per reading
    summary = stream_reply(1, events(), posted.append, interval=0.005, clock=lambda: next(ticks) / 1000)
    assert summary.text == ANSWER
    assert 1 <= len(posted) < len(SCRIPT)  # batched: fewer UI messages than steps
    segments = [s for chunk in posted for s in chunk.segments]
    assert "".join(t for t, _ in segments) == ANSWER
    assert origin_per_char(segments) == origin_per_char([s for step in SCRIPT for s in step])
    assert all(isinstance(m, ReplyChunk) for m in posted) and posted[-1].stats.tokens == 10


def test_settings_steps_stay_in_range():
    s = ChatSettings(k=1, temperature=0.0, p_min=0.95, drafter="model")
    assert ChatSettings().drafter == "auto"  # chat's default, as on the command line
    assert ChatSettings.from_dict({"drafter": "lookup"}).drafter == "suffix"  # defaults saved before suffix
    assert s.step_k(3).k == 4 and ChatSettings(k=15).step_k(3).k == 16
    assert s.step_k(-1).k == "auto"  # auto sits below 1
    assert ChatSettings(k="auto").step_k(1).k == 1 and ChatSettings(k="auto").step_k(-1).k == "auto"
    assert s.step_temperature(-1).temperature == 0.0 and s.step_temperature(3).temperature == pytest.approx(0.3)
    assert s.step_p_min(1).p_min == 0.95 and s.step_p_min(-1).p_min == pytest.approx(0.9)
    assert [s.next_drafter().drafter, s.next_drafter().next_drafter().drafter] == ["mtp", "none"]
    assert ChatSettings(drafter="none").next_drafter(("suffix", "none")).drafter == "suffix"
    assert ChatSettings(drafter="none", k=4).generation_config().k == 0
    with pytest.raises(SpecllamaError):
        ChatSettings(temperature=-1)


def test_chat_command_options_load_the_draft_where_it_pays_or_is_asked_for():
    from specllama.cli.cmd_chat import chat_load_options, settings_from
    from specllama.cli.main import build_parser
    from specllama.cli.options import resolved_for

    def load(*argv):
        args = build_parser().parse_args(["chat", *argv])
        return chat_load_options(args, resolved_for(args))

    resolved = resolved_for(build_parser().parse_args(["chat", "-k", "3", "--drafter", "lookup", "--temp", "0.7"]))
    settings = settings_from(resolved)
    assert (settings.drafter, settings.k, settings.temperature) == ("suffix", 3, 0.7)  # lookup: its old name
    opts = load("-k", "3", "--drafter", "lookup")
    assert opts.load_draft and opts.draft_if_pays  # auto is on offer: the draft only where it pays
    asked = load("--drafter", "model")
    assert asked.load_draft and not asked.draft_if_pays  # asked for: loaded, F2 can switch freely
    assert settings_from(resolved_for(build_parser().parse_args(["chat", "--drafter", "none"]))).k == "auto"
    assert load("--target", "/models/t.gguf", "--no-draft").draft is None  # no draft named: auto / suffix / none only
    with pytest.raises(SpecllamaError):
        load("--pair", "no-such-pair")


# --- the app with a fake engine ------------------------------------------------------------------

def test_prompt_streams_tokens_with_their_origins():
    async def scenario():
        runtime = FakeRuntime()
        async with chat_app(runtime).run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: pilot.app.runtime is not None)
            await pilot.press("h", "i", "enter")  # typed, as a user would
            await wait_until(pilot, lambda: not pilot.app.busy)
            question, reply = pilot.app.query(ChatMessage)
            assert question.text == "hi" and reply.text == ANSWER
            assert origin_per_char(reply.segments) == origin_per_char([s for step in SCRIPT for s in step])
            # Each origin's text carries that origin's colour.
            styled = {(reply.text[span.start:span.end], str(span.style)) for span in reply.content.spans}
            assert ("def is", ORIGIN_STYLES["draft"]) in styled and ("_prime", ORIGIN_STYLES["target"]) in styled
            assert ("    return", ORIGIN_STYLES["bonus"]) in styled
            assert pilot.app.conversation.messages[-1] == {"role": "assistant", "content": ANSWER}
            assert pilot.app.last_summary.finish_reason == "stop"
    run(scenario)


def test_next_turn_sends_the_whole_conversation_and_reuses_the_cache():
    async def scenario():
        runtime = FakeRuntime()
        async with chat_app(runtime).run_test(size=SIZE) as pilot:
            await send(pilot, "first")
            first = pilot.app.last_summary
            await send(pilot, "second")
            assert pilot.app.last_summary.reused_tokens >= first.prompt_tokens
            roles = [m["role"] for m in pilot.app.conversation.messages]
            assert roles == ["user", "assistant", "user", "assistant"]
    run(scenario)


def test_origin_colours_toggle_off_and_on():
    async def scenario():
        async with chat_app().run_test(size=SIZE) as pilot:
            await send(pilot, "hi")
            reply = pilot.app.query(ChatMessage).last()
            # Rendered Markdown first (the daily view), the origin colours one key away.
            assert not reply.showing_origins and "colours off" in screen_text(pilot.app)
            assert "is_prime" in screen_text(pilot.app)
            await pilot.press("ctrl+o")
            assert reply.showing_origins and reply.content.spans and "colours on" in screen_text(pilot.app)
            await pilot.press("ctrl+o")
            assert not reply.showing_origins and reply.markdown.display and "colours off" in screen_text(pilot.app)
    run(scenario)


def test_keys_change_the_engine_settings_without_reloading():
    async def scenario():
        runtime = FakeRuntime()
        async with chat_app(runtime, k=4).run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: pilot.app.runtime is not None)
            await pilot.press("f4", "f4", "f3", "f6", "f6", "f8")  # K 5, temperature 0.2, p_min 0.05
            await send(pilot, "hi")
            config = runtime.engine.configs[-1]
            assert config.k == 5 and config.sampling.temperature == pytest.approx(0.2)
            assert (config.drafter, config.p_min) == ("model", 0.05)
            await pilot.press("f2")
            assert pilot.app.settings.drafter == "none"
            await send(pilot, "plain now")
            assert runtime.engine.configs[-1].drafter == "none" and runtime.engine.configs[-1].k == 0
            assert "none" in screen_text(pilot.app)
    run(scenario)


def test_k_steps_down_to_auto_whatever_the_runtime_measured():
    async def scenario():
        # Costs are learnt from the steps themselves: K auto needs no measured curve.
        for costs, expected in ((StepCosts(), "auto"), (None, "auto")):
            runtime = FakeRuntime(costs=costs)
            async with chat_app(runtime, k=1).run_test(size=SIZE) as pilot:
                await wait_until(pilot, lambda: pilot.app.runtime is not None)
                await pilot.press("f3")
                await send(pilot, "hi")
                assert runtime.engine.configs[-1].k == expected
    run(scenario)


def test_changes_during_an_answer_apply_from_the_next_one():
    async def scenario():
        runtime = FakeRuntime(SCRIPT * 5, step_delay=0.05)
        async with chat_app(runtime, k=4).run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: pilot.app.runtime is not None)
            pilot.app.ask("long")
            await wait_until(pilot, lambda: runtime.engine.ks_seen)
            await pilot.press("f4", "f2")
            assert pilot.app.settings.k == 5 and pilot.app.settings.drafter == "none"  # shown...
            assert runtime.engine.configs[-1].drafter == "model"  # ...not applied to the running answer
            await wait_until(pilot, lambda: not pilot.app.busy)
            assert set(runtime.engine.ks_seen) == {4}
            await send(pilot, "next")
            assert runtime.engine.configs[-1].drafter == "none"
    run(scenario)


def test_escape_stops_the_answer_and_keeps_its_text():
    async def scenario():
        runtime = FakeRuntime(SCRIPT * 50, step_delay=0.02)
        async with chat_app(runtime).run_test(size=SIZE) as pilot:
            reply = await stopped_with_escape(pilot, "go on forever")
            summary = pilot.app.last_summary
            assert summary.finish_reason == "cancelled" and 0 < summary.steps < 50 * len(SCRIPT)
            assert reply.text == summary.text == pilot.app.conversation.last_answer
            assert "stopped" in reply.border_subtitle
    run(scenario)


def test_every_answer_is_decoded_on_the_one_decoding_thread():
    # Not on Textual's worker threads (asyncio's executor, whose threads live on): a second thread that
    # ever decoded would leave OpenMP's threads asleep at every barrier (llama/decode_threads.py).
    async def scenario():
        runtime = FakeRuntime(SCRIPT * 20, step_delay=0.02)
        played_on, play = [], runtime.engine._play

        def recording(*args):
            for event in play(*args):
                played_on.append(threading.current_thread().name)
                yield event

        runtime.engine._play = recording
        async with chat_app(runtime).run_test(size=SIZE) as pilot:
            await stopped_with_escape(pilot, "go on")
            await send(pilot, "again")
            assert pilot.app.last_summary.finish_reason == "stop"
        assert played_on and set(played_on) == {"specllama-decode"}, set(played_on)
    run(scenario)


def test_an_engine_error_becomes_a_notification_and_the_app_lives_on():
    async def scenario():
        notices = []
        runtime = FakeRuntime(fail_at_step=2)
        app = chat_app(runtime)
        hook = lambda m: notices.append(m.notification) if isinstance(m, Notify) else None  # noqa: E731
        async with app.run_test(size=SIZE, message_hook=hook) as pilot:
            await send(pilot, "overflow please")
            assert any(n.severity == "error" and "context full" in n.message for n in notices)
            assert app.is_running and app.conversation.messages == []
            assert app.query_one("#prompt").value == "overflow please"  # given back to edit or resend
            runtime.engine.fail_at_step = None
            await send(pilot, "again")
            assert app.last_summary.text == ANSWER
    run(scenario)


def test_a_load_error_becomes_a_notification():
    def broken(progress, status):
        raise ModelFileError("model file not found: /nowhere/model.gguf")

    async def scenario():
        notices = []
        hook = lambda m: notices.append(m.notification) if isinstance(m, Notify) else None  # noqa: E731
        app = ChatApp(broken)
        async with app.run_test(size=SIZE, message_hook=hook) as pilot:
            await wait_until(pilot, lambda: notices)
            assert notices[0].severity == "error" and "/nowhere/model.gguf" in notices[0].message
            assert "could not load the models" in screen_text(app)
            app.query_one("#prompt").value = "hello?"
            await pilot.press("enter")
            assert app.is_running and app.conversation.messages == []
    run(scenario)


def test_new_conversation_and_copy_last_answer():
    async def scenario():
        async with chat_app().run_test(size=SIZE) as pilot:
            await pilot.press("ctrl+y")  # nothing to copy yet: a warning, no crash
            await send(pilot, "hi")
            await pilot.press("ctrl+y")
            assert pilot.app.clipboard == ANSWER
            await pilot.press("ctrl+n")
            assert pilot.app.conversation.messages == [] and not pilot.app.query(ChatMessage)
    run(scenario)


def test_help_screen_lists_every_binding():
    async def scenario():
        async with chat_app().run_test(size=TALL) as pilot:  # every key fits without scrolling
            await pilot.press("f1")
            assert isinstance(pilot.app.screen, HelpScreen)
            text = screen_text(pilot.app)
            for binding in ChatApp.BINDINGS:
                assert binding.tooltip in text
            await pilot.press("escape")
            assert not isinstance(pilot.app.screen, HelpScreen)
    run(scenario)


# --- snapshots -----------------------------------------------------------------------------------

def test_snapshot_main_screen_after_an_answer():
    async def scenario():
        async with chat_app().run_test(size=SIZE) as pilot:
            await send(pilot, "Write is_prime in Python.")
            assert_snapshot("chat_main", screen_text(pilot.app))
    run(scenario)


def test_snapshot_help_screen():
    async def scenario():
        async with chat_app().run_test(size=TALL) as pilot:  # all of it, without scrolling
            await wait_until(pilot, lambda: pilot.app.runtime is not None)
            await pilot.press("ctrl+g")
            await pilot.pause()
            assert_snapshot("chat_help", screen_text(pilot.app))
    run(scenario)


def test_snapshot_help_keys_table():
    # The table alone, as plain text: a key added, dropped or renamed shows in the diff.
    assert_snapshot("chat_help_keys", HelpScreen(ChatApp.BINDINGS)._keys().plain + "\n")


def test_snapshot_loading_with_download_progress():
    release = threading.Event()

    def downloading(progress, status):
        progress(250_000_000, 1_000_000_000, "qwen2.5-coder-1.5b part 6/22")
        release.wait(10)
        return FakeRuntime()

    async def scenario():
        app = ChatApp(downloading)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: "250 / 1,000 MB" in screen_text(app))
            assert_snapshot("chat_loading", screen_text(app))
            release.set()
            await wait_until(pilot, lambda: app.runtime is not None)
    try:
        run(scenario)
    finally:
        release.set()


# --- the real pair -------------------------------------------------------------------------------
