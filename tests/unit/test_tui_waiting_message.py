"""A message sent while the models load waits for them and says so; it is sent once they are in,
or goes back to the input box when the load fails (it stayed in the input box, unexplained)."""

from __future__ import annotations

import threading

from specllama.errors import ModelFileError
from specllama.tui import ChatApp, ChatSettings
from specllama.tui.capture import screen_text
from tests.support.chat_app import SIZE, FakeRuntime, run, wait_until


def slow_load(release: threading.Event, outcome):
    def load(progress, status):
        status("loading the models…")
        release.wait(10)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome
    return load


def test_a_message_sent_while_loading_waits_and_is_sent_when_the_models_are_in():
    release = threading.Event()
    runtime = FakeRuntime()
    app = ChatApp(slow_load(release, runtime), ChatSettings(drafter="model"), flush_interval=0)

    async def scenario():
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            app.prompt.value = "Write is_prime in Python."
            await pilot.press("enter")
            await pilot.pause()
            assert app.prompt.value == ""  # taken, not left behind
            assert "your message waits and is sent as soon as" in screen_text(app)
            assert runtime.engine.configs == []  # nothing can run before the models are in
            release.set()
            await wait_until(pilot, lambda: app.conversation.last_role == "assistant" and not app.busy)
            assert [m.role for m in app.view.messages] == ["user", "assistant"]
            assert app.view.messages[0].text == "Write is_prime in Python."
            assert len(runtime.engine.configs) == 1  # sent once
    try:
        run(scenario)
    finally:
        release.set()


def test_a_second_message_while_one_waits_stays_in_the_input_box():
    release = threading.Event()
    app = ChatApp(slow_load(release, FakeRuntime()), ChatSettings(drafter="model"), flush_interval=0)

    async def scenario():
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            for text in ("first", "second"):
                app.prompt.value = text
                await pilot.press("enter")
                await pilot.pause()
            assert app.prompt.value == "second"  # one waits; this one is not lost
            release.set()
            await wait_until(pilot, lambda: app.conversation.last_role == "assistant" and not app.busy)
            assert app.view.messages[0].text == "first"
    try:
        run(scenario)
    finally:
        release.set()


def test_a_failed_load_gives_the_waiting_message_back():
    release = threading.Event()
    app = ChatApp(slow_load(release, ModelFileError("no such file: x.gguf")), ChatSettings(), flush_interval=0)

    async def scenario():
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            app.prompt.value = "hello there"
            await pilot.press("enter")
            await pilot.pause()
            release.set()
            await wait_until(pilot, lambda: app.load_failed is not None)
            assert app.prompt.value == "hello there"
            assert "your message was not sent: it is back in the" in screen_text(app)
    try:
        run(scenario)
    finally:
        release.set()
