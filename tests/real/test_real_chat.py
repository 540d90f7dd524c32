"""The chat app over the real pair: two turns that reuse the target's cache, and the model picker's
switch to the 0.5B alone (the old runtime's models freed). The rest of the app's tests run on a fake
runtime: tests/unit/test_tui*.py."""

from __future__ import annotations

import pytest

from specllama.tui import ChatApp, ChatSettings
from specllama.tui.widgets import ChatMessage
from tests.support.chat_app import SIZE, origin_per_char, run, wait_until
from tests.support.model_picker import open_picker

pytestmark = pytest.mark.real_models


@pytest.mark.real_models
def test_real_pair_two_turns_reuse_the_cache():
    from specllama.runtime import LoadOptions, open_runtime

    opts = LoadOptions(pair="qwen2.5-coder", n_ctx=1024)
    app = ChatApp(lambda progress, status: open_runtime(opts, progress=progress, status=status),
                  ChatSettings(max_tokens=24, k=4, drafter="model"))

    async def scenario():
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: app.runtime is not None, timeout=300)
            app.query_one("#prompt").value = "Write a Python function that returns the square of a number."
            await pilot.press("enter")
            await wait_until(pilot, lambda: not app.busy, timeout=300)
            first = app.last_summary
            reply = app.query(ChatMessage).last()
            assert first.tokens > 0 and reply.text == first.text
            assert "model" in origin_per_char(reply.segments)  # the 0.5B's tokens are accepted
            app.query_one("#prompt").value = "Now add a docstring."
            await pilot.press("enter")
            await wait_until(pilot, lambda: not app.busy, timeout=300)
            second = app.last_summary
            # The first turn stays in the target's cache: only the new turn is decoded.
            assert second.reused_tokens >= first.prompt_tokens, (second.reused_tokens, first.prompt_tokens)
            assert second.tokens > 0 and app.runtime.context_use()[0] > second.prompt_tokens
    try:
        run(scenario)
    finally:
        app.close_runtime()


@pytest.mark.real_models
def test_real_switch_from_the_pair_to_the_small_model_alone(real_model_paths):
    """The default pair loaded, then the picker's switch to the 0.5B as a target with no draft: the
    next answer comes from the new runtime and the old one's models are freed."""
    from specllama.runtime import LoadOptions, open_runtime

    opts = LoadOptions(pair="qwen2.5-coder", n_ctx=512)
    app = ChatApp(lambda progress, status: open_runtime(opts, progress=progress, status=status),
                  ChatSettings(max_tokens=8, k=4), load_options=opts)
    closed = []

    async def scenario():
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: app.runtime is not None, timeout=300)
            old = app.runtime
            assert old.has_draft_model
            free = old.close
            old.close = lambda: (closed.append(old), free())
            await open_picker(pilot, "qwen2.5-coder-0.5b", None)
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: app.runtime is not old, timeout=300)
            new = app.runtime
            assert closed == [old] and old.target_ctx._ctx is None  # llama.cpp's context freed
            assert not new.has_draft_model and new.target_path.name.startswith("qwen2.5-coder-0.5b")
            assert app.settings.drafter == "auto"  # the model drafter left with the draft model
            assert app.models.loaded_refs() == ("qwen2.5-coder-0.5b", None)
            app.query_one("#prompt").value = "Say hello."
            await pilot.press("enter")
            await wait_until(pilot, lambda: app.last_summary is not None, timeout=300)
            assert app.last_summary is not None and app.last_summary.tokens > 0
            assert new.context_use()[0] > 0  # decoded in the new runtime's context
    try:
        run(scenario)
    finally:
        app.close_runtime()
