"""A thinking model in the chat: its thinking is kept apart from the answer (never copied, saved or
sent back as the answer's text), shown dimmed above it, folded to one line until `h` (with a
message selected) shows every answer's."""

from __future__ import annotations

from specllama.dialects import BY_NAME
from specllama.tui.capture import screen_text
from specllama.tui.widgets.chat_message import ChatMessage
from tests.support.chat_app import SIZE, FakeRuntime, chat_app, run, send

# A Qwen3-style answer, token by token, in two speculative steps.
THINKING_SCRIPT = [
    [("<think>", "target"), ("\nthe sky", "draft"), (" scatters", "draft"), (" blue", "target")],
    [("\n</think>\n\n", "draft"), ("Blue", "bonus"), (" light.", "target")],
]


class ThinkingRuntime(FakeRuntime):
    """The fake runtime with a template that thinks (Hermes dialect, <think> markers)."""

    def chat_dialect(self):
        return BY_NAME["hermes"], True

    def render_chat(self, messages, tools=None, template_kwargs=None) -> str:
        return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages) + "<|im_start|>assistant\n"


def test_thinking_is_folded_apart_from_the_answer_and_h_shows_it():
    async def scenario():
        async with chat_app(ThinkingRuntime(THINKING_SCRIPT)).run_test(size=SIZE) as pilot:
            await send(pilot, "why blue?")
            reply = pilot.app.query(ChatMessage).last()
            assert reply.text == "Blue light."  # the answer alone: what is copied, saved and sent back
            assert pilot.app.conversation.messages[-1] == {"role": "assistant", "content": "Blue light."}
            assert reply.thinking.text.strip() == "the sky scatters blue"
            assert "thinking (4 words" in screen_text(pilot.app) and "scatters" not in screen_text(pilot.app)
            await pilot.press("tab", "h")  # a message selected: plain keys act
            assert reply.thinking.shown and "the sky scatters blue" in screen_text(pilot.app)
            await pilot.press("h")
            assert not reply.thinking.shown and "scatters" not in screen_text(pilot.app)
    run(scenario)


def test_a_model_that_does_not_think_shows_no_thinking():
    async def scenario():
        async with chat_app(FakeRuntime()).run_test(size=SIZE) as pilot:
            await send(pilot, "hi")
            reply = pilot.app.query(ChatMessage).last()
            assert not reply.thinking.display and "thinking (" not in screen_text(pilot.app)
    run(scenario)
