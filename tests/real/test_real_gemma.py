"""A second real family: Gemma 3 270M (its own 262k vocabulary, sliding-window attention, a base
model without a chat template) runs with the suffix drafter and gives plain decoding's text."""

from __future__ import annotations

import json

import pytest

from specllama.cli.main import main

pytestmark = pytest.mark.real_models

PROMPT = ("def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\n\n"
          "def fibonacci_memo(n, memo={}):\n")


def test_gemma_drafts_from_the_text_and_gives_plain_decodings_answer(real_model, tmp_path, capsys):
    real_model("gemma3-270m")  # through the store: its four part packages
    prompt = tmp_path / "prompt.txt"
    prompt.write_text(PROMPT)
    common = ["run", "-m", "gemma3-270m", "-f", str(prompt), "--exact", "-n", "48", "--json", "--ctx", "1024"]
    assert main([*common, "--drafter", "none"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main([*common, "--drafter", "suffix"]) == 0
    spec = json.loads(capsys.readouterr().out)
    assert spec["text"] == plain["text"] and spec["drafted"] > spec["accepted"] > 0


def test_gemma_ends_at_its_own_turn_marker_and_offers_no_tool_calls(real_model):
    """Its stop tokens come from its GGUF (<end_of_turn> among them); without a chat template it
    cannot put a tool list into a prompt, so a server refuses tools for it rather than drop them."""
    from specllama.llama.model import GGUFModel

    model = GGUFModel(real_model("gemma3-270m"), vocab_only=True)
    assert {"<eos>", "<end_of_turn>"} <= {model.token_text(t) for t in model.eog_ids}
    assert model.chat_template is None and model.tool_call_format is None


def test_gemma_in_the_chat_app_drafts_and_answers_as_plain_decoding(real_model):
    """Two turns typed into the chat app over the real model (no template: the turns are joined as
    plain text), the suffix drafter's answers against plain decoding's in exact mode."""
    import asyncio

    from specllama.runtime import LoadOptions, open_runtime
    from specllama.tui.app import ChatApp
    from specllama.tui.settings import ChatSettings
    from specllama.tui.widgets import ChatMessage
    from tests.support.chat_app import SIZE, wait_until

    path = real_model("gemma3-270m")

    def answers(drafter: str) -> list[str]:
        opts = LoadOptions(target=str(path), load_draft=False, n_ctx=1024, exact=True)
        app = ChatApp(lambda progress, show: open_runtime(opts, progress=progress, status=lambda n: show(n.text)),
                      ChatSettings(max_tokens=24, k="auto", drafter=drafter), flush_interval=0)
        shown: list[str] = []

        async def scenario():
            async with app.run_test(size=SIZE) as pilot:
                await wait_until(pilot, lambda: app.runtime is not None, timeout=300)
                for text in ("List the days of the week: Monday, Tuesday,", "Again: Monday, Tuesday,"):
                    app.query_one("#prompt").value = text
                    await pilot.press("enter")
                    await wait_until(pilot, lambda: not app.busy, timeout=300)
                shown.extend(m.text for m in list(app.query(ChatMessage))[1::2])
        try:
            asyncio.run(scenario())
        finally:
            app.close_runtime()
        return shown

    plain = answers("none")
    assert len(plain) == 2 and all(plain)
    assert answers("suffix") == plain


def test_gemma_served_answers_and_refuses_tools_in_the_apis_shape(real_model, tmp_path):
    """serve -m gemma3-270m: a chat answer (turns as plain text, ended at a stop token from its
    GGUF or max_tokens), and a request with tools is a 400 in OpenAI's error shape saying why."""
    import httpx

    from tests.support.live_serve import LiveServer

    real_model("gemma3-270m")
    live = LiveServer(["-m", "gemma3-270m", "--ctx", "1024", "--max-tokens", "24", "--exact"], tmp_path / "serve.log")
    try:
        client = live.client()
        messages = [{"role": "user", "content": "Count: one, two, three,"}]
        plain = client.chat.completions.create(model="gemma", messages=messages, max_tokens=24, temperature=0,
                                               extra_body={"drafter": "none"})
        spec = client.chat.completions.create(model="gemma", messages=messages, max_tokens=24, temperature=0,
                                              extra_body={"drafter": "suffix"})
        assert plain.choices[0].message.content and spec.choices[0].message.content == plain.choices[0].message.content
        assert plain.choices[0].finish_reason in ("stop", "length")
        tool = {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}
        r = httpx.post(f"{live.url}/v1/chat/completions", timeout=60,
                       json={"model": "gemma", "messages": messages, "tools": [tool], "max_tokens": 8})
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert "tool" in error["message"] and "Traceback" not in r.text and error.get("type")
    finally:
        assert live.stop() == 0
    assert "Traceback" not in live.stderr()
