"""`specllama serve` for agents and editors, with tiny models over 127.0.0.1 and the real clients
(openai, anthropic): tools through the chat template, tool results fed back, prefill continued,
logprobs of accepted drafts, the Anthropic and Responses APIs' shapes, CORS, keys, max_tokens
capping and the per-request log line. A tiny model writes no meaningful tool call: what needs one
is in test_serve_agents_real.py."""

from __future__ import annotations

import json
import math

import anthropic
import openai
import pytest

from tests.support.live_serve import LiveServer, anthropic_prompt_tokens

KEY = "sk-agents-0123"
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                             "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                            "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "description": "The time in a city.",
                                          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def server(tiny_models, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    live = LiveServer(["--target", str(tiny_models["a"]), "--drafter", "suffix", "-k", "3", "--ctx", "512",
                       "--parallel", "2", "--max-tokens", "24", "--cors", "https://app.example.org", "--temp", "0"],
                      log, api_key=KEY)
    yield live
    assert live.stop() == 0, live.stderr()[-3000:]
    assert "Traceback" not in live.stderr()


@pytest.fixture(scope="module")
def no_tools_server(tiny_models, tmp_path_factory):
    """SmolLM2's template, which has no tool support; no --max-tokens; --strict-model."""
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    live = LiveServer(["--target", str(tiny_models["other"]), "--drafter", "none", "--ctx", "96", "--parallel", "1",
                       "--strict-model"], log)
    yield live
    assert live.stop() == 0, live.stderr()[-3000:]


def _prompt_tokens(server, **fields) -> int:
    reply = server.client().chat.completions.create(model="a", max_tokens=1, temperature=0, **fields)
    return reply.usage.prompt_tokens


# --- tools through the template ------------------------------------------------------------------

def test_tools_go_into_the_prompt_through_the_models_template_and_none_keeps_them_out(server):
    plain = _prompt_tokens(server, messages=ASK)
    with_tools = _prompt_tokens(server, messages=ASK, tools=[WEATHER])
    assert with_tools > plain + 40  # Qwen's template writes the tool list and the <tool_call> instructions
    assert _prompt_tokens(server, messages=ASK, tools=[WEATHER, TIME]) > with_tools
    assert _prompt_tokens(server, messages=ASK, tools=[WEATHER], tool_choice="none") == plain


def test_a_tool_round_trip_renders_the_call_and_the_result(server):
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    turns = ASK + [{"role": "assistant", "content": None, "tool_calls": [call]},
                   {"role": "tool", "tool_call_id": "call_1", "content": "18 C and sunny"}]
    before = _prompt_tokens(server, messages=ASK, tools=[WEATHER])
    after = _prompt_tokens(server, messages=turns, tools=[WEATHER])
    # the call's JSON and the result in its <tool_response> turn: both rendered, the arguments as an object
    assert after > before + 25


def test_forced_calls_name_an_offered_function_even_from_a_model_that_writes_noise(server):
    # The tiny model writes noise; the forced opening and the call's grammar (decoding/grammar.py) keep
    # it to a call of an offered function (the named one when named). Its string arguments may still
    # run to max_tokens (a JSON string can be any length): then the finish is length and the half call
    # is dropped, neither a call nor raw markup in the content (issue 41), never a 500.
    client = server.client()
    for choice, names in (("required", {"get_weather", "get_time"}),
                          ({"type": "function", "function": {"name": "get_time"}}, {"get_time"})):
        reply = client.chat.completions.create(model="a", messages=ASK, tools=[WEATHER, TIME], tool_choice=choice,
                                               max_tokens=64, temperature=0)
        message, finish = reply.choices[0].message, reply.choices[0].finish_reason
        if finish == "tool_calls":
            assert message.tool_calls and {c.function.name for c in message.tool_calls} <= names
            assert all(isinstance(json.loads(c.function.arguments), dict) for c in message.tool_calls)
        else:
            assert finish == "length" and not message.tool_calls and "<tool_call>" not in (message.content or "")
    named = client.chat.completions.create(model="a", messages=ASK, tools=[WEATHER, TIME], max_tokens=1, temperature=0,
                                           tool_choice={"type": "function", "function": {"name": "get_time"}})
    assert named.choices[0].finish_reason == "length" and not named.choices[0].message.tool_calls


@pytest.mark.parametrize("fields, param", [
    ({"tools": [{"type": "retrieval"}]}, "tools[0]"),
    ({"tools": [WEATHER], "tool_choice": "always"}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"tools": [WEATHER, WEATHER]}, "tools"),
    ({"tools": [WEATHER], "parallel_tool_calls": "yes"}, "parallel_tool_calls"),
    ({"functions": [WEATHER["function"]]}, "functions"),
])
def test_bad_tool_fields_get_a_400_that_names_them(server, fields, param):
    with pytest.raises(openai.BadRequestError) as e:
        server.client().chat.completions.create(model="a", messages=ASK, max_tokens=1, **fields)
    assert e.value.body["param"] == param


def test_a_template_without_tool_support_gets_a_clear_400(no_tools_server):
    client = no_tools_server.client()
    name = client.models.list().data[0].id
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=name, messages=ASK, tools=[WEATHER], max_tokens=1)
    assert "no tool support" in e.value.body["message"] and e.value.body["param"] == "tools"
    tool_turn = ASK + [{"role": "tool", "tool_call_id": "x", "content": "18 C"}]
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=name, messages=tool_turn, max_tokens=1)


# --- prefill, model ids, max_tokens ------------------------------------------------------------

def test_an_assistant_message_last_is_continued_as_llama_server_does(server):
    client = server.client()
    prefill = "The weather in Paris is"
    reply = client.chat.completions.create(model="a", messages=ASK + [{"role": "assistant", "content": prefill}],
                                           max_tokens=12, temperature=0)
    # the same text as a raw completion of the templated turns followed by the prefill
    rendered = ("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
                f"<|im_start|>user\n{ASK[0]['content']}<|im_end|>\n<|im_start|>assistant\n{prefill}")
    raw = client.completions.create(model="a", prompt=rendered, max_tokens=12, temperature=0)
    assert reply.choices[0].message.content == raw.choices[0].text
    assert reply.usage.prompt_tokens == raw.usage.prompt_tokens


def test_strict_model_keeps_the_404(no_tools_server):
    with pytest.raises(openai.NotFoundError) as e:
        no_tools_server.client().chat.completions.create(model="gpt-4o", messages=ASK, max_tokens=1)
    assert e.value.body["code"] == "model_not_found"


def test_max_tokens_above_the_servers_cap_is_capped_and_said_in_usage_and_log(server):
    reply = server.client().chat.completions.create(model="a", messages=ASK, max_tokens=5000, temperature=0)
    assert reply.usage.completion_tokens <= 24
    assert reply.usage.model_extra["max_tokens_capped"] == {"requested": 5000, "allowed": 24}
    assert "max_tokens 5000 capped to 24 (--max-tokens)" in server.stderr()


def test_a_huge_max_tokens_ends_at_the_context_with_length(no_tools_server):
    client = no_tools_server.client()
    model = client.models.list().data[0]
    n_ctx = model.model_extra["meta"]["n_ctx"]  # --ctx 96, as llama.cpp rounds it
    reply = client.chat.completions.create(model=model.id, messages=[{"role": "user", "content": "hi"}],
                                           max_tokens=10**9, temperature=0)
    usage = reply.usage
    if reply.choices[0].finish_reason == "length":  # the tiny model may end its turn first: then it fits
        assert usage.prompt_tokens + usage.completion_tokens == n_ctx
    else:
        assert usage.prompt_tokens + usage.completion_tokens < n_ctx


def test_every_request_gets_one_log_line(server):
    server.client().chat.completions.create(model="a", messages=[{"role": "user", "content": "log me"}], max_tokens=3)
    lines = [line for line in server.stderr().splitlines() if "POST /v1/chat/completions 200" in line]
    assert lines and all("prompt " in line and "tok/s" in line for line in lines)
    assert any("drafted suffix" in line or "no drafts" in line for line in lines)


# --- logprobs: the target's own values, drafts included --------------------------------------

def test_logprobs_of_accepted_drafts_are_the_targets_real_values(server):
    client = server.client()
    ask = [{"role": "user", "content": "Repeat after me: one two three four five six seven eight."}]
    kwargs = dict(model="a", messages=ask, max_tokens=24, temperature=0, logprobs=True, top_logprobs=3)
    client.chat.completions.create(**kwargs)  # the suffix drafter learns this answer
    drafted = client.chat.completions.create(**kwargs)
    assert drafted.model_extra["speculation"]["accepted"] > 0  # most of it came from accepted drafts
    alone = client.chat.completions.create(extra_body={"drafter": "none"}, **kwargs)
    assert alone.model_extra["speculation"]["drafted"] == 0
    a, b = drafted.choices[0].logprobs.content, alone.choices[0].logprobs.content
    assert [t.token for t in a] == [t.token for t in b] and len(a) == drafted.usage.completion_tokens
    for x, y in zip(a, b):
        assert math.isclose(x.logprob, y.logprob, abs_tol=1e-3) and x.logprob < 0  # real values, not 0
        assert len(x.top_logprobs) == 3 and x.top_logprobs[0].logprob >= x.top_logprobs[1].logprob
        assert math.isclose(x.top_logprobs[0].logprob, x.logprob, abs_tol=1e-6)  # greedy: the argmax


def test_streamed_logprobs_and_the_completions_form(server):
    client = server.client()
    chunks = list(client.chat.completions.create(model="a", messages=ASK, max_tokens=6, temperature=0, stream=True,
                                                 logprobs=True))
    streamed = [t for c in chunks if c.choices and c.choices[0].logprobs for t in c.choices[0].logprobs.content]
    assert len(streamed) == 6 and all(t.logprob <= 0 for t in streamed)
    legacy = client.completions.create(model="a", prompt="def f():", max_tokens=4, temperature=0, logprobs=2)
    lp = legacy.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 4
    assert "".join(lp.tokens) == legacy.choices[0].text and all(len(t) == 2 for t in lp.top_logprobs)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="a", messages=ASK, logprobs=True, top_logprobs=21)


# --- HTTP: keys, CORS -----------------------------------------------------------------------------

def test_bearer_in_any_case_and_x_api_key_are_accepted(server):
    body = json.dumps({"model": "a", "messages": ASK, "max_tokens": 1}).encode()
    for headers in ({"Authorization": f"bearer {KEY}"}, {"Authorization": f"BEARER {KEY}"}, {"x-api-key": KEY}):
        status, _, _ = server.request("POST", "/v1/chat/completions", body, headers=headers, auth=False)
        assert status == 200, headers
    for headers in ({"Authorization": "Bearer wrong"}, {"x-api-key": "wrong"}, {}):
        status, _, _ = server.request("POST", "/v1/chat/completions", body, headers=headers, auth=False)
        assert status == 401, headers


def test_cors_preflight_is_answered_before_the_key_for_local_pages_and_named_origins(server):
    def preflight(origin):
        return server.request("OPTIONS", "/v1/chat/completions", auth=False, headers={
            "Origin": origin, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type"})

    for origin in ("http://localhost:5173", "http://127.0.0.1:3000", "https://app.example.org"):
        status, headers, _ = preflight(origin)
        assert status == 200 and headers["access-control-allow-origin"] == origin, origin
    status, headers, _ = preflight("https://evil.example.com")
    assert status == 400 and "access-control-allow-origin" not in headers
    body = json.dumps({"model": "a", "messages": ASK, "max_tokens": 1}).encode()
    status, headers, _ = server.request("POST", "/v1/chat/completions", body, headers={"Origin": "http://localhost:8000"})
    assert status == 200 and headers["access-control-allow-origin"] == "http://localhost:8000"


# --- the Anthropic Messages API and the Responses API, with their clients ------------------------

def _anthropic(server):
    """The server's default temperature is 0 (--temp 0): anthropic 2.x no longer sends one."""
    return anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=0)


def test_anthropic_messages_whole_and_streamed_give_the_same_text(server):
    client = _anthropic(server)
    kwargs = dict(model="claude-local", max_tokens=12, system="Be brief.",
                  messages=[{"role": "user", "content": [{"type": "text", "text": "Say hello."}]}])
    message = client.messages.create(**kwargs)
    assert message.type == "message" and message.role == "assistant" and message.model == "a"
    assert message.stop_reason in ("end_turn", "max_tokens") and message.usage.output_tokens <= 12
    with client.messages.stream(**kwargs) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert streamed == message.content[0].text == final.content[0].text
    assert final.usage.output_tokens == message.usage.output_tokens and final.stop_reason == message.stop_reason
    count = client.messages.count_tokens(model="x", messages=kwargs["messages"], system="Be brief.")
    assert count.input_tokens == anthropic_prompt_tokens(message.usage)


def test_anthropic_tool_blocks_are_rendered_and_errors_have_anthropics_shape(server):
    client = _anthropic(server)
    tool = {"name": "get_weather", "description": "The weather.", "input_schema": WEATHER["function"]["parameters"]}
    turns = [{"role": "user", "content": "Weather in Paris?"},
             {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                                "input": {"city": "Paris"}}]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"}]}]
    reply = client.messages.create(model="x", max_tokens=4, messages=turns, tools=[tool])
    assert anthropic_prompt_tokens(reply.usage) > 60
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model="x", max_tokens=4, messages=[{"role": "user", "content": [{"type": "image"}]}])
    assert e.value.body["type"] == "error" and e.value.body["error"]["type"] == "invalid_request_error"


def test_anthropic_stop_sequences(server):
    client = _anthropic(server)
    base = client.messages.create(model="x", max_tokens=20, messages=[{"role": "user", "content": "List."}])
    text = base.content[0].text
    word = text[len(text) // 2:len(text) // 2 + 2]
    if not word.strip():
        pytest.fail(f"no stop sequence to pick from {text!r}")
    cut = client.messages.create(model="x", max_tokens=20, stop_sequences=[word],
                                 messages=[{"role": "user", "content": "List."}])
    assert cut.stop_reason == "stop_sequence" and cut.stop_sequence == word
    assert cut.content[0].text == text[:text.index(word)]


def test_responses_api_whole_and_streamed(server):
    client = server.client()
    kwargs = dict(model="a", instructions="Be brief.", input="Say hello.", max_output_tokens=10, temperature=0)
    whole = client.responses.create(**kwargs)
    assert whole.object == "response" and whole.output_text and whole.usage.output_tokens <= 10
    events = list(client.responses.create(stream=True, **kwargs))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] in ("response.completed",
                                                                                         "response.incomplete")
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == whole.output_text
    assert events[-1].response.output_text == whole.output_text
    items = [{"role": "user", "content": "Weather in Paris?"},
             {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
             {"type": "function_call_output", "call_id": "call_1", "output": "18 C"}]
    flat = {"type": "function", "name": "get_weather", "parameters": WEATHER["function"]["parameters"]}
    assert client.responses.create(model="a", input=items, tools=[flat], max_output_tokens=2).status in (
        "completed", "incomplete")
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="a", input="hi", previous_response_id="resp_1")
