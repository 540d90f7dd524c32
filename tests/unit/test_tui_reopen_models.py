"""Reopening a saved conversation brings back its models and settings: the settings at once, the
models through the picker's background switch (the current ones answer until the new ones are in,
then are closed), never a download; with the fake runtime (no llama.cpp)."""

from __future__ import annotations

import threading

from textual.notifications import Notify

from specllama.runtime import LoadOptions
from specllama.tui import ChatApp, ChatSettings
from specllama.tui.history import History
from specllama.tui.screens import HistoryScreen
from tests.support import model_picker
from tests.support.chat_app import run, send, wait_until
from tests.support.model_picker import SIZE, ClosingRuntime

registry = model_picker.registry  # the picker tests' fixture: local target and drafts, a hub-only target


def app_for(registry, path, first, builder, load: LoadOptions, **settings) -> ChatApp:
    return ChatApp(lambda progress, status: first, ChatSettings(**settings), flush_interval=0, history_path=path,
                   build_runtime=builder, load_options=load, registry=registry)


async def reopen_newest(pilot) -> None:
    await wait_until(pilot, lambda: pilot.app.runtime is not None)
    await pilot.press("ctrl+l")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, HistoryScreen))
    await pilot.press("enter")
    await wait_until(pilot, lambda: not isinstance(pilot.app.screen, HistoryScreen))
    await pilot.pause()


def notices_hook(notices: list):
    return lambda m: notices.append(m.notification.message) if isinstance(m, Notify) else None


def test_reopen_restores_settings_at_once_and_models_in_the_background(registry, tmp_path):
    path = tmp_path / "chats.sqlite3"

    async def held_with_the_pair():
        first = ClosingRuntime("pair target")
        app = app_for(registry, path, first, None, LoadOptions(target="t", draft="d"),
                      temperature=0.7, system="answer in French", drafter="model", k=3)
        async with app.run_test(size=SIZE) as pilot:
            await send(pilot, "bonjour")
        saved = History(path)
        [conv] = saved.conversations()
        saved.close()
        assert conv.settings["models"] == {"target": "t", "draft": "d"}
    run(held_with_the_pair)

    old = ClosingRuntime("target alone", has_draft=False)
    new = ClosingRuntime("pair target again")
    asked, release, notices = [], threading.Event(), []

    def builder(opts, progress, status):
        asked.append(opts)
        assert release.wait(10)
        return new

    async def reopened_with_the_target_alone():
        app = app_for(registry, path, old, builder, LoadOptions(target="t", load_draft=False), drafter="suffix")
        async with app.run_test(size=SIZE, message_hook=notices_hook(notices)) as pilot:
            await reopen_newest(pilot)
            # Settings now; the models are loading while the old ones stay in place.
            assert app.settings.temperature == 0.7 and app.settings.k == 3
            assert app.conversation.system == "answer in French"
            await wait_until(pilot, lambda: asked)
            assert (asked[0].target, asked[0].draft, asked[0].load_draft) == ("t", "d", True)
            assert app.runtime is old and not old.closed and app.query("#swap-panel")
            assert app.settings.drafter == "auto"  # the model drafter needs the draft still loading (auto: suffix or none)
            said = next(n for n in notices if n.startswith("reopened"))
            assert "loading its models, t ← d" in said and "model drafter comes with them" in said
            await send(pilot, "encore")  # answered by the old models meanwhile
            assert len(old.engine.configs) == 1
            release.set()
            await wait_until(pilot, lambda: app.runtime is new)
            assert old.closed and not new.closed and app.settings.drafter == "model"
            await send(pilot, "et maintenant ?")
            [config] = new.engine.configs
            assert config.sampling.temperature == 0.7 and config.drafter == "model" and config.k == 3
            assert app.models.loaded_refs() == ("t", "d")
    try:
        run(reopened_with_the_target_alone)
    finally:
        release.set()


def saved_conversation(path, title: str, models: dict | None) -> None:
    history = History(path)
    settings = ChatSettings(temperature=0.2).as_dict() | ({"models": models} if models else {})
    cid = history.new_conversation(title, "Display Name", None, settings)
    history.add_message(cid, "user", "hi")
    history.add_message(cid, "assistant", "hello")
    history.close()


def test_reopen_loads_nothing_when_the_models_match_or_would_need_a_download(registry, tmp_path):
    cases = [  # saved models -> what the notice says; nothing is built in any of them
        ({"target": "t", "draft": "d"}, None),
        ({"target": "big", "draft": "d"}, "held with big ← d, not cached: the model picker (m / F12) fetches and loads it"),
        ({"target": "gone", "draft": None}, "which cannot be loaded: unknown model 'gone'"),
        (None, "(held with Display Name; now pair target)"),  # saved before the registry names were kept
    ]
    for models, expected in cases:
        path = tmp_path / f"{len(str(models))}-{models and models['target']}.sqlite3"
        saved_conversation(path, "old chat", models)
        built, notices = [], []

        async def scenario():
            app = app_for(registry, path, ClosingRuntime("pair target"), lambda o, p, s: built.append(o),
                          LoadOptions(target="t", draft="d"))
            async with app.run_test(size=SIZE, message_hook=notices_hook(notices)) as pilot:
                await reopen_newest(pilot)
                assert app.settings.temperature == 0.2  # the settings are restored whatever happens to the models
                said = next(n for n in notices if n.startswith("reopened"))
                if expected is None:
                    assert said == "reopened “old chat”"
                else:
                    assert expected in said, said
                assert app.models.loading is None and not app.query("#swap-panel")
        run(scenario)
        assert not built, models
