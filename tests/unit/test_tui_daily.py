"""The chat as a daily driver: rendered answers, copying, the message box, narrow terminals,
failure states. Same fake runtime as test_tui.py (no llama.cpp)."""

from __future__ import annotations

import os
import stat
import time

import pytest
from textual import events
from textual.notifications import Notify
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownFence

from specllama.errors import ModelFileError
from specllama.tui import ChatApp
from specllama.tui.capture import screen_text
from specllama.tui.clipboard import OSC52
from specllama.tui.widgets import ChatMessage, StatsPanel
from specllama.tui.widgets.chat_message import code_blocks
from tests.support.chat_app import MD_SCRIPT, FakeRuntime, GatedScript, assert_snapshot, chat_app, run, send, wait_until

SIZE = (120, 36)
# An answer with prose and two fenced blocks, streamed a few tokens per step.
MD_ANSWER = "".join(t for step in MD_SCRIPT for t, _ in step)


def notices_hook(notices: list):
    return lambda m: notices.append(m.notification) if isinstance(m, Notify) else None


@pytest.fixture
def no_clipboard_tool(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    for var in ("DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(var, raising=False)


def test_code_blocks_are_found_in_order():
    assert code_blocks(MD_ANSWER) == ["def sq(x):\n    return x * x\n", "assert sq(3) == 9\n"]
    assert code_blocks("no code here") == []


def test_answer_renders_as_markdown_with_highlighted_code_blocks(no_clipboard_tool):
    async def scenario():
        notices = []
        async with chat_app(FakeRuntime(MD_SCRIPT)).run_test(size=SIZE, message_hook=notices_hook(notices)) as pilot:
            await send(pilot, "square?")
            reply = pilot.app.query(ChatMessage).last()
            await wait_until(pilot, lambda: len(reply.query(MarkdownFence)) == 2)
            fences = list(reply.query(MarkdownFence))
            assert [f.code.strip() for f in fences] == [c.strip() for c in code_blocks(MD_ANSWER)] and fences[0].lexer == "python"
            text = screen_text(pilot.app)
            assert "def sq(x):" in text and "```" not in text  # rendered, not the raw source
            await pilot.press("ctrl+b")
            assert pilot.app.clipboard == "assert sq(3) == 9\n"
            assert notices[-1].message.endswith(OSC52)  # no tool on PATH: not a claim of "copied"
            await pilot.press("ctrl+y")
            assert pilot.app.clipboard == MD_ANSWER
    run(scenario)


def test_markdown_streams_while_the_answer_is_generated():
    script = GatedScript(MD_SCRIPT * 2, gate_at=len(MD_SCRIPT))

    async def scenario():
        async with chat_app(FakeRuntime(script)).run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: pilot.app.runtime is not None)
            pilot.app.ask("square?")
            reply = pilot.app.query(ChatMessage).last()
            await wait_until(pilot, lambda: len(reply.query(MarkdownFence)) == 2)  # rendered mid-answer
            assert pilot.app.busy
            script.gate.set()
            await wait_until(pilot, lambda: not pilot.app.busy)
            await wait_until(pilot, lambda: len(reply.query(MarkdownFence)) == 4)
            assert reply.markdown.source == MD_ANSWER * 2
    try:
        run(scenario)
    finally:
        script.gate.set()


def test_answer_and_panel_are_painted_together_at_most_every_interval_and_all_at_the_end(monkeypatch):
    from specllama.tui.app import LIVE_INTERVAL
    paints = []  # (what, when)
    real_append, real_live = Markdown.append, StatsPanel.show_live

    def counted_append(self, fragment):
        paints.append(("answer", time.monotonic()))
        return real_append(self, fragment)

    def counted_live(self, stats, context):
        paints.append(("panel", time.monotonic()))
        real_live(self, stats, context)
    monkeypatch.setattr(Markdown, "append", counted_append)
    monkeypatch.setattr(StatsPanel, "show_live", counted_live)

    async def scenario():
        runtime = FakeRuntime(MD_SCRIPT * 8, step_delay=0.02)  # 40 chunks in about a second
        async with chat_app(runtime).run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: pilot.app.runtime is not None)
            pilot.app.ask("square?")
            await wait_until(pilot, lambda: not pilot.app.busy)
            reply = pilot.app.query(ChatMessage).last()
            await wait_until(pilot, lambda: reply.markdown.source == MD_ANSWER * 8)
        # Each live paint is the answer then the panel, in one go; the end may add the answer's rest.
        live = paints[:-1] if len(paints) % 2 else paints
        assert [what for what, _ in live] == ["answer", "panel"] * (len(live) // 2)
        starts = [when for what, when in live if what == "answer"]
        assert 2 <= len(starts) < 40  # batched, not one paint per chunk
        assert all(b - a >= LIVE_INTERVAL * 0.9 for a, b in zip(starts, starts[1:]))
    run(scenario)


def test_origin_view_catches_the_markdown_up_when_switched_back():
    async def scenario():
        runtime = FakeRuntime(MD_SCRIPT * 3, step_delay=0.03)
        async with chat_app(runtime).run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: pilot.app.runtime is not None)
            await pilot.press("ctrl+o")  # origins while it streams
            pilot.app.ask("square?")
            await wait_until(pilot, lambda: not pilot.app.busy)
            reply = pilot.app.query(ChatMessage).last()
            assert reply.showing_origins and reply.text == MD_ANSWER * 3
            await pilot.press("ctrl+o")
            await wait_until(pilot, lambda: reply.markdown.source == MD_ANSWER * 3)
    run(scenario)


def test_copy_uses_a_clipboard_tool_found_on_path(monkeypatch, tmp_path):
    bin_dir, out = tmp_path / "bin", tmp_path / "copied.txt"
    bin_dir.mkdir()
    tool = bin_dir / "xclip"
    tool.write_text(f"#!/bin/sh\ncat > {out}\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)

    async def scenario():
        notices = []
        async with chat_app(FakeRuntime(MD_SCRIPT)).run_test(size=SIZE, message_hook=notices_hook(notices)) as pilot:
            await send(pilot, "square?")
            await pilot.press("ctrl+y")
            assert out.read_text() == MD_ANSWER and "copied with xclip" in notices[-1].message
    run(scenario)


def test_multi_line_paste_and_newline_keys_keep_every_line():
    async def scenario():
        runtime = FakeRuntime()
        async with chat_app(runtime).run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: pilot.app.runtime is not None)
            prompt = pilot.app.query_one("#prompt")
            height_before = prompt.size.height
            pilot.app.post_message(events.Paste("line one\nline two\nline three"))
            await pilot.pause()
            await pilot.press("ctrl+j", "x")
            assert prompt.value == "line one\nline two\nline three\nx"
            await pilot.pause()
            assert prompt.size.height > height_before  # the box grows with its lines
            await pilot.press("enter")
            await wait_until(pilot, lambda: not pilot.app.busy)
            assert pilot.app.conversation.messages[0]["content"] == "line one\nline two\nline three\nx"
            assert prompt.value == ""
    run(scenario)


def test_narrow_terminal_hides_the_panel_and_f9_brings_it_back():
    async def scenario():
        async with chat_app().run_test(size=(40, 10)) as pilot:
            await wait_until(pilot, lambda: pilot.app.runtime is not None)
            panel = pilot.app.query_one(StatsPanel)
            assert not panel.display and pilot.app.query_one("#chat").size.width == 40
            await pilot.press("f9")
            assert panel.display and pilot.app.query_one("#chat").size.width >= 20  # the chat keeps room
            assert "tokens/s" in screen_text(pilot.app)
            await pilot.press("f9")
            assert not panel.display
            await send(pilot, "hi")
            assert_snapshot("chat_narrow", screen_text(pilot.app))
        async with chat_app().run_test(size=SIZE) as pilot:
            assert pilot.app.query_one(StatsPanel).display
    run(scenario)


def test_new_chat_resets_the_context_shown():
    async def scenario():
        async with chat_app().run_test(size=SIZE) as pilot:
            await send(pilot, "hi")
            models = pilot.app.query_one("#models")
            used = pilot.app.runtime.target_ctx.n_past
            assert used > 0 and f"context     {used} / 4096" in models.render().plain
            await pilot.press("ctrl+n")
            assert "context     0 / 4096" in models.render().plain
    run(scenario)


def test_context_full_says_how_to_go_on():
    async def scenario():
        notices = []
        async with chat_app(FakeRuntime(fail_at_step=1)).run_test(size=SIZE, message_hook=notices_hook(notices)) as pilot:
            await send(pilot, "too long")
            assert any("ctrl+n starts a new chat" in n.message for n in notices)
    run(scenario)


def test_failed_load_shows_in_the_header_and_fails_the_command(monkeypatch):
    def broken(progress, status):
        raise ModelFileError("model file not found: /nowhere/model.gguf")

    async def scenario():
        app = ChatApp(broken)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: app.load_failed)
            text = screen_text(app)
            assert "could not load the models" in text.splitlines()[0] and "loading the models" not in text
    run(scenario)

    # `specllama chat` itself: one line on stderr and a non-zero status.
    import specllama.tui
    from specllama.cli import main as cli_main

    class FailedApp:
        def __init__(self, *args, **kwargs):
            self.unexpected_errors, self.load_failed = [], "model file not found: /nowhere/model.gguf"

        def run(self):
            pass

        def close_runtime(self):
            pass

    monkeypatch.setattr(specllama.tui, "ChatApp", FailedApp)
    monkeypatch.setattr("specllama.cli.cmd_chat.chat_load_options", lambda args, resolved, reopen=None: None)
    monkeypatch.setattr("specllama.cli.cmd_chat.require_terminal", lambda: None)  # pytest's stdin is no tty
    assert cli_main.main(["chat"]) == 1


# --- settings screen and the user's defaults -----------------------------------------------------

def test_settings_screen_applies_and_saves_defaults(monkeypatch, tmp_path):
    from textual.widgets import Input, TextArea

    from specllama.tui import user_defaults
    from specllama.tui.screens import SettingsScreen

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))

    async def scenario():
        notices = []
        runtime = FakeRuntime()
        app = chat_app(runtime)
        async with app.run_test(size=SIZE, message_hook=notices_hook(notices)) as pilot:
            await wait_until(pilot, lambda: app.runtime is not None)
            await pilot.press("f11")
            screen = app.screen
            assert isinstance(screen, SettingsScreen)
            assert "context 4096 tokens · threads 2" in screen.query_one("#fixed").render().plain
            screen.query_one("#temperature", Input).value = "nonsense"
            await pilot.press("ctrl+s")
            assert app.screen is screen and notices[-1].severity == "error"  # stays, says which field
            assert "temperature" in notices[-1].message
            screen.query_one("#temperature", Input).value = "0.7"
            screen.query_one("#k", Input).value = "3"
            screen.query_one("#max_tokens", Input).value = "99"
            screen.query_one("#system", TextArea).load_text("answer in French")
            await pilot.click("#save")
            await pilot.pause()
            assert not isinstance(app.screen, SettingsScreen)
            assert (app.settings.temperature, app.settings.k, app.settings.max_tokens) == (0.7, 3, 99)
            await send(pilot, "hi")
            config = runtime.engine.configs[-1]
            assert config.k == 3 and config.max_tokens == 99
            assert app.conversation.for_template()[0] == {"role": "system", "content": "answer in French"}
            await pilot.press("ctrl+t")  # the other key; escape cancels without a change
            await pilot.press("escape")
            assert app.settings.temperature == 0.7
        saved = user_defaults.load()
        assert saved["temperature"] == 0.7 and saved["k"] == 3 and saved["system"] == "answer in French"
        assert "seed" not in saved  # unset: left out (TOML has no null)
    run(scenario)


def test_saved_defaults_reach_the_chat_command_and_options_win(monkeypatch, tmp_path):
    from specllama.cli.cmd_chat import chat_settings
    from specllama.cli.main import build_parser
    from specllama.cli.options import resolved_for
    from specllama.tui import ChatSettings, user_defaults

    def settings(*argv):
        args = build_parser().parse_args(["chat", *argv])
        return chat_settings(args, resolved_for(args))

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    user_defaults.save(ChatSettings(temperature=0.9, k=5, system='say "hi"\nthen stop', stop=("###",)))
    assert (tmp_path / "specllama" / "chat.toml").exists()
    plain = settings()
    assert (plain.temperature, plain.k, plain.system, plain.stop) == (0.9, 5, 'say "hi"\nthen stop', ("###",))
    given = settings("--temp", "0.2")
    assert given.temperature == 0.2 and given.k == 5
    assert settings("--temp", "0", "-k", "auto").temperature == 0.0  # typed, though the parser's default: it wins
    assert settings("-k", "auto").k == "auto"
    (tmp_path / "specllama" / "chat.toml").write_text("temperature = [")
    from specllama.errors import SpecllamaError
    with pytest.raises(SpecllamaError, match="chat.toml"):
        settings()


# --- saying why ----------------------------------------------------------------------------------

def test_panel_says_why_k_auto_drafted_nothing():
    from specllama.decoding.cost.curve import CostCurve
    from specllama.decoding.cost.model import break_even_acceptance
    from specllama.decoding.cost.online import Prior, StepCosts

    curve = CostCurve(0.05, [1.0, 1.4, 1.6, 1.96], 0.5, 256, 3)
    needed = break_even_acceptance(curve.ratio, 2, 0.5)

    async def scenario():
        runtime = FakeRuntime(costs=StepCosts(Prior(curve.ratio, curve.t1_s, curve.draft_ratio, learned=True)))
        runtime.engine.auto_k = 0
        async with chat_app(runtime, k="auto").run_test(size=SIZE) as pilot:
            await send(pilot, "hi")
            answer = pilot.app.query_one("#answer").render().plain
            assert "mean K      0.00" in answer
            assert f"the draft would need ≥{needed:.0%} acceptance at K = 2 to pay".replace("%", " %") in answer
            runtime.engine.auto_k = 4
            await send(pilot, "again")
            assert "no drafts" not in pilot.app.query_one("#answer").render().plain
    run(scenario)


def test_why_no_drafts_when_nothing_would_pay():
    from specllama.decoding.cost.online import Prior, StepCosts
    from specllama.tui.explain import why_no_drafts

    # K = 2 costs 2.5 + 2 * 0.9 > 3: what this machine's steps were seen to cost
    slow_verify = StepCosts(Prior(lambda n: [1.0, 1.5, 2.5][n - 1] if n <= 3 else None, 0.05, 0.9, learned=True))
    assert "even 100 % acceptance" in why_no_drafts(slow_verify, "model")
    assert "≥" in why_no_drafts(slow_verify, "lookup")  # a free drafter can still pay
    assert "K auto chose 0" in why_no_drafts(None, "model")


def test_version_names_specllama_and_llama_cpp(capsys):
    from specllama.cli.main import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("specllama ") and out[1].startswith("llama-cpp-python 0.")
    assert out[2].startswith("llama.cpp: ") and ("AVX" in out[2] or "NEON" in out[2])


def test_clicking_a_code_block_copies_it(no_clipboard_tool):
    async def scenario():
        async with chat_app(FakeRuntime(MD_SCRIPT)).run_test(size=SIZE) as pilot:
            await send(pilot, "square?")
            reply = pilot.app.query(ChatMessage).last()
            await wait_until(pilot, lambda: len(reply.query(MarkdownFence)) == 2)
            first = reply.query(MarkdownFence).first()
            await pilot.click(first)
            await pilot.pause()
            assert pilot.app.clipboard.strip() == "def sq(x):\n    return x * x"
    run(scenario)


def test_new_chat_while_streaming_leaves_no_paint_behind():
    script = GatedScript(MD_SCRIPT * 2, gate_at=len(MD_SCRIPT))

    async def scenario():
        async with chat_app(FakeRuntime(script)).run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: pilot.app.runtime is not None)
            pilot.app.ask("square?")
            reply = pilot.app.query(ChatMessage).last()
            await wait_until(pilot, lambda: reply.query(MarkdownFence))
            await pilot.press("ctrl+n")
            assert pilot.app.view.live._timer is None  # no paint pending for the removed answer
            script.gate.set()
            await wait_until(pilot, lambda: not pilot.app.busy)
            await send(pilot, "next")
            assert pilot.app.conversation.last_answer == MD_ANSWER * 2
    try:
        run(scenario)
    finally:
        script.gate.set()
