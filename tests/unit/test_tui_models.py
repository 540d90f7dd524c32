"""The model picker (F12) and the switch it starts, with the fake runtime (no llama.cpp): the
choice is checked from GGUF headers (tiny header-only files written here), loaded in a thread while
the old runtime serves, swapped in, and the old one closed after; a failure keeps the old one.
Also the shipped registry's hub pairs."""

from __future__ import annotations

import threading
from pathlib import Path

from textual.notifications import Notify

from specllama.errors import ModelFileError
from specllama.models.registry import load_registry
from specllama.tui import ChatApp, ChatSettings
from specllama.tui.model_choice import HUB_NOTE, Choice, model_rows, precheck
from specllama.tui.screens import ModelPickerScreen
from tests.support import model_picker
from tests.support.chat_app import run, send, wait_until
from tests.support.model_picker import SIZE, ClosingRuntime, open_picker

registry = model_picker.registry  # the fixture: local target and drafts, a hub-only target


def picker_app(registry, builder, first=None) -> ChatApp:
    first = first or ClosingRuntime("old target")
    return ChatApp(lambda progress, status: first, ChatSettings(), flush_interval=0,
                   build_runtime=builder, registry=registry)


# --- what the picker knows without widgets ---------------------------------------------------------------------

def test_rows_say_role_cache_and_hub(registry):
    rows = {r.name: r for r in model_rows(registry)}
    assert rows["t"].cached and rows["t"].source == "local file" and rows["t"].role == "target"
    assert not rows["big"].cached and rows["big"].source == HUB_NOTE
    assert rows["d"].role == "draft"


def test_precheck_refuses_a_draft_with_another_tokenizer(registry):
    refused = precheck(registry, Choice("t", "x"))
    assert not refused.ok and "vocab type differs" in refused.text and "x cannot draft for t" in refused.text
    assert precheck(registry, Choice("t", "d")).ok
    fetch = precheck(registry, Choice("big", "d"))
    assert fetch.ok and fetch.to_fetch == ("big",) and "will be fetched" in fetch.text and HUB_NOTE in fetch.text


def test_shipped_registry_has_the_hub_pairs():
    registry = load_registry(user=Path("/nonexistent/models.toml"))
    for size in ("7b", "14b", "32b"):
        pair = registry.pair(f"qwen2.5-coder-{size}")
        assert pair.draft == "qwen2.5-coder-0.5b"
        spec = registry.model(pair.target)
        assert spec.role == "target" and spec.registry is None and spec.path is None
        assert spec.hub.repo == f"Qwen/Qwen2.5-Coder-{size.upper()}-Instruct-GGUF"
        assert spec.hub.file == spec.file == f"qwen2.5-coder-{size}-instruct-q4_k_m.gguf"


def test_models_list_marks_hub_models(capsys):
    from specllama.cli.main import main

    assert main(["models", "list"]) == 0
    line = next(li for li in capsys.readouterr().out.splitlines() if li.startswith("qwen2.5-coder-14b "))
    assert " hub " in line


# --- the switch, in the app ------------------------------------------------------------------------------------

def test_switch_loads_in_background_then_swaps_and_closes_the_old(registry):
    old = ClosingRuntime("old target")
    new = ClosingRuntime("new target")
    asked = []
    release = threading.Event()

    def builder(opts, progress, status):
        asked.append(opts)
        assert release.wait(10)
        return new

    async def scenario():
        app = picker_app(registry, builder, first=old)
        async with app.run_test(size=SIZE) as pilot:
            await open_picker(pilot, "t", "d")
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: asked)
            # Loading: the old runtime still answers, and is not closed.
            assert app.runtime is old and app.query("#swap-panel")
            await send(pilot, "still there?")
            assert app.conversation.last_answer and not old.closed
            release.set()
            await wait_until(pilot, lambda: app.runtime is new)
            assert old.closed and not new.closed and not app.query("#swap-panel")
            assert asked[0].target == "t" and asked[0].draft == "d" and asked[0].load_draft
            await send(pilot, "and now?")
            assert len(new.engine.configs) == 1 and len(old.engine.configs) == 1
    run(scenario)


def test_models_ready_mid_answer_wait_for_it_to_end(registry):
    gate = threading.Event()
    old = ClosingRuntime("old target")
    old.engine.step_delay = 0.0
    new = ClosingRuntime("new target")
    original_play = old.engine._play

    def slow_play(prompt, config, handle):
        for event in original_play(prompt, config, handle):
            gate.wait(10)
            yield event
    old.engine._play = slow_play

    async def scenario():
        app = picker_app(registry, lambda o, p, s: new, first=old)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: app.runtime is not None)
            app.query_one("#prompt").value = "a long one"
            await pilot.press("enter")
            await wait_until(pilot, lambda: app.busy)
            await open_picker(pilot, "t", None)
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: app.models.pending is new)
            assert app.runtime is old and not old.closed  # the answer keeps its models
            gate.set()
            await wait_until(pilot, lambda: app.runtime is new)
            assert old.closed and app.conversation.last_answer
    run(scenario)


def test_failed_load_keeps_the_old_models_and_says_why(registry):
    old = ClosingRuntime("old target")
    notices = []

    def builder(opts, progress, status):
        raise ModelFileError("model file not found: /gone.gguf")

    async def scenario():
        app = picker_app(registry, builder, first=old)
        async with app.run_test(size=SIZE, message_hook=lambda m: notices.append(m.notification)
                                if isinstance(m, Notify) else None) as pilot:
            await open_picker(pilot, "t", "d")
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: any("not found" in n.message for n in notices))
            assert app.runtime is old and not old.closed and not app.query("#swap-panel")
            failed = next(n for n in notices if "not found" in n.message)
            assert failed.severity == "error" and "still using old target" in failed.message
            await send(pilot, "works?")
            assert app.conversation.last_answer
    run(scenario)


def test_incompatible_pair_is_refused_before_loading(registry):
    built = []

    async def scenario():
        app = picker_app(registry, lambda o, p, s: built.append(o))
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_picker(pilot, "t", "x")
            assert "refused" in str(screen.query_one("#check").render())
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert app.screen is screen  # stays open with the reason; nothing loads
            assert not built and app.models.loading is None
    run(scenario)


def test_picking_a_pair_fills_target_and_draft(registry):
    async def scenario():
        app = picker_app(registry, lambda o, p, s: None)
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_picker(pilot, "t", None)
            pairs = screen.query_one("#pairs")
            pairs.focus()
            pairs.highlighted = [o.id for o in pairs.options].index("big")
            await pilot.press("enter")
            await pilot.pause()
            assert screen.chosen() == Choice("big", "d", "big")
            assert "will be fetched" in str(screen.query_one("#check").render())
            await pilot.press("escape")
            await pilot.pause()
            assert not isinstance(app.screen, ModelPickerScreen) and app.models.loading is None
    run(scenario)


# --- the real pair -----------------------------------------------------------------------------------------------
