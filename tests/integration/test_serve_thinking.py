"""A thinking model's answer (a tiny random-weight GGUF carrying a Qwen3-style template whose
generation prompt opens `<think>`): its thinking comes apart from its content in all three APIs,
whole and streamed alike; `chat_template_kwargs.enable_thinking: false` and `reasoning_effort:
"none"` reach the template and turn it off; an earlier turn's reasoning_content reaches the template."""

from __future__ import annotations

import anthropic
import pytest

from tests.support.live_serve import LiveServer, anthropic_prompt_tokens
from tests.support.templates import QWEN3_STYLE
from tests.support.tiny_gguf import write_tiny_model

ASK = [{"role": "user", "content": "Why is the sky blue?"}]


@pytest.fixture(scope="module")
def server(tokenizer_sources, tmp_path_factory):
    out = tmp_path_factory.mktemp("thinking")
    model = write_tiny_model(out / "thinking.gguf", tokenizer_sources["qwen"], seed=3, chat_template=QWEN3_STYLE)
    live = LiveServer(["--target", str(model), "--drafter", "suffix", "-k", "3", "--ctx", "512", "--parallel", "1",
                       "--max-tokens", "16", "--temp", "0"], out / "serve.log")
    yield live
    assert live.stop() == 0, live.stderr()[-3000:]
    assert "Traceback" not in live.stderr()


def _stream(client, **kwargs) -> tuple[str, str]:
    content, reasoning = "", ""
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            reasoning += getattr(choice.delta, "reasoning_content", None) or ""
    return content, reasoning


def test_the_opened_thinking_is_reasoning_content_whole_and_streamed(server):
    client = server.client()
    whole = client.chat.completions.create(model="m", messages=ASK, max_tokens=16)
    message = whole.choices[0].message
    reasoning = message.model_extra.get("reasoning_content")
    assert reasoning and "<think>" not in reasoning  # the noise a tiny model writes, all of it thinking
    assert not message.content
    assert _stream(client, model="m", messages=ASK, max_tokens=16) == (message.content or "", reasoning)


@pytest.mark.parametrize("switch", [{"chat_template_kwargs": {"enable_thinking": False}},
                                    {"reasoning_effort": "none"}])
def test_thinking_turned_off_reaches_the_template(server, switch):
    client = server.client()
    reply = client.chat.completions.create(model="m", messages=ASK, max_tokens=16, extra_body=switch)
    message = reply.choices[0].message
    assert message.content and not message.model_extra.get("reasoning_content")
    thinking = client.chat.completions.create(model="m", messages=ASK, max_tokens=1)
    assert reply.usage.prompt_tokens > thinking.usage.prompt_tokens  # the template closed the thinking itself
    assert _stream(client, model="m", messages=ASK, max_tokens=16, extra_body=switch) == (message.content, "")


def test_an_earlier_turns_thinking_reaches_the_template(server):
    client = server.client()
    turns = [*ASK, {"role": "assistant", "content": "Rayleigh.", "reasoning_content": "light scatters " * 20},
             {"role": "user", "content": "More?"}]
    plain = [*ASK, {"role": "assistant", "content": "Rayleigh."}, {"role": "user", "content": "More?"}]
    with_thinking = client.chat.completions.create(model="m", messages=turns, max_tokens=1).usage.prompt_tokens
    without = client.chat.completions.create(model="m", messages=plain, max_tokens=1).usage.prompt_tokens
    assert with_thinking >= without + 40


@pytest.mark.parametrize("value, param", [({"chat_template_kwargs": "no"}, "chat_template_kwargs"),
                                          ({"chat_template_kwargs": {"messages": []}}, "chat_template_kwargs.messages"),
                                          ({"reasoning_effort": "max"}, "reasoning_effort")])
def test_bad_thinking_fields_are_400s_naming_them(server, value, param):
    import openai

    with pytest.raises(openai.BadRequestError) as e:
        server.client().chat.completions.create(model="m", messages=ASK, max_tokens=1, extra_body=value)
    assert e.value.body["param"] == param


def test_a_forced_call_closes_the_opened_thinking_first(server):
    # tool_choice required: the prompt's <think> is closed before the call's opening; neither marker
    # is the answer's text (a tiny model's arguments may run to max_tokens: then the half call is dropped)
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    reply = server.client().chat.completions.create(model="m", messages=ASK, tools=[weather], tool_choice="required",
                                                    max_tokens=16)
    message = reply.choices[0].message
    assert "</think>" not in (message.content or "") and not message.model_extra.get("reasoning_content")
    assert message.tool_calls or reply.choices[0].finish_reason == "length"  # a half call is dropped


def test_anthropic_thinking_blocks_whole_and_streamed(server):
    client = anthropic.Anthropic(base_url=server.url, api_key="x")
    whole = client.messages.create(model="m", max_tokens=16, messages=ASK)
    assert whole.content[0].type == "thinking" and whole.content[0].thinking
    with client.messages.stream(model="m", max_tokens=16, messages=ASK) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == [b.type for b in whole.content]
    assert final.content[0].thinking == whole.content[0].thinking


def test_responses_reasoning_items_whole_and_streamed(server):
    client = server.client()
    whole = client.responses.create(model="m", input="Why is the sky blue?", max_output_tokens=16)
    assert whole.output[0].type == "reasoning"
    text = whole.output[0].content[0].text
    assert text
    events = list(client.responses.create(model="m", input="Why is the sky blue?", max_output_tokens=16, stream=True))
    deltas = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert deltas == text
    done = next(e for e in events if e.type in ("response.completed", "response.incomplete"))
    assert done.response.output[0].type == "reasoning"


def test_an_earlier_anthropic_thinking_block_reaches_the_template(server):
    """The thinking blocks this server writes come back in the next request (Claude Code sends the
    whole conversation): as OpenAI chat's reasoning_content, they reach the template (they were
    dropped as another model's trace before the issue 38 merge)."""
    client = anthropic.Anthropic(base_url=server.url, api_key="x")

    def prompt_tokens(assistant_blocks: list[dict]) -> int:
        turns = [*ASK, {"role": "assistant", "content": assistant_blocks}, {"role": "user", "content": "More?"}]
        return anthropic_prompt_tokens(client.messages.create(model="m", max_tokens=1, messages=turns).usage)

    text = {"type": "text", "text": "Rayleigh."}
    thought = {"type": "thinking", "thinking": "light scatters " * 20, "signature": ""}
    redacted = {"type": "redacted_thinking", "data": "opaque"}
    assert prompt_tokens([thought, text]) >= prompt_tokens([text]) + 40
    assert prompt_tokens([redacted, text]) == prompt_tokens([text])  # encrypted: nothing to hand on
