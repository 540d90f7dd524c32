"""Issue 41: a 200 never breaks its own contract. Through a live `specllama serve` (tiny model,
127.0.0.1): a stop string cannot cut a constrained answer into invalid JSON; `tools` with a
`response_format` keep the format for an answer that is not a call; a tool call cut by max_tokens
is reported as cut (`length` / `max_tokens`), not as a call; Anthropic's `stop_sequence` names the
one that matched; count_tokens counts any size."""

from __future__ import annotations

import json

import anthropic
import jsonschema
import pytest

from tests.support.live_serve import LiveServer, chat_body

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["city", "rank"],
          "properties": {"city": {"type": "string", "maxLength": 8},
                         "rank": {"type": "integer", "minimum": 0, "maximum": 99}}}
FORMAT = {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True}}
CITY = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}}, "required": ["city"],
        "additionalProperties": False}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                             "parameters": CITY}}


@pytest.fixture(scope="module")
def server(tiny_models, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    live = LiveServer(["--target", str(tiny_models["a"]), "--drafter", "suffix", "--ctx", "1024", "--parallel", "2"], log)
    yield live
    assert live.stop() == 0, live.stderr()[-3000:]
    assert "Traceback" not in live.stderr()


def _post(live: LiveServer, path: str, body: dict, headers: dict | None = None) -> tuple[int, dict]:
    status, _, data = live.request("POST", path, json.dumps(body).encode(), headers=headers)
    return status, json.loads(data)


@pytest.mark.parametrize("stop", ['"', ["\"", "}", ":"], ", "])
def test_a_stop_string_cannot_cut_a_constrained_answer_into_invalid_json(server, stop):
    for seed in (1, 2, 3):
        status, reply = _post(server, "/v1/chat/completions", json.loads(chat_body(
            "a", "A city as JSON.", max_tokens=120, temperature=0.8, seed=seed, stop=stop, response_format=FORMAT)))
        assert status == 200, reply
        choice = reply["choices"][0]
        assert choice["finish_reason"] == "stop", choice
        jsonschema.validate(json.loads(choice["message"]["content"]), SCHEMA)


def test_a_stop_string_still_applies_to_free_text(server):
    whole = server.client().chat.completions.create(model="a", messages=[{"role": "user", "content": "hi"}],
                                                    max_tokens=30, temperature=0)
    text = whole.choices[0].message.content
    stop = text[10:13]
    cut = server.client().chat.completions.create(model="a", messages=[{"role": "user", "content": "hi"}],
                                                  max_tokens=30, temperature=0, stop=[stop])
    assert cut.choices[0].message.content == text[:text.index(stop)] and cut.choices[0].finish_reason == "stop"


def test_tools_with_tool_choice_none_keep_the_response_format(server):
    for seed in (1, 2):
        reply = server.client().chat.completions.create(
            model="a", messages=[{"role": "user", "content": "A city."}], tools=[WEATHER], tool_choice="none",
            response_format=FORMAT, max_tokens=120, temperature=0.8, seed=seed)
        assert reply.choices[0].finish_reason == "stop"
        jsonschema.validate(json.loads(reply.choices[0].message.content), SCHEMA)


def test_tools_with_tool_choice_auto_answer_with_calls_or_the_formatted_json(server):
    for seed in (1, 2, 3, 4):
        reply = server.client().chat.completions.create(
            model="a", messages=[{"role": "user", "content": "A city."}], tools=[WEATHER], tool_choice="auto",
            parallel_tool_calls=False, response_format=FORMAT, max_tokens=120, temperature=0.8, seed=seed)
        message = reply.choices[0].message
        if message.tool_calls:
            assert reply.choices[0].finish_reason == "tool_calls"
            assert all(call.function.name == "get_weather" for call in message.tool_calls)
        else:
            assert reply.choices[0].finish_reason == "stop", message.content
            jsonschema.validate(json.loads(message.content), SCHEMA)


def test_a_tool_call_cut_by_max_tokens_is_length_and_not_a_call(server):
    """A forced call cut at every length: where the budget ended the answer, the finish says so and
    no (half) call is claimed, in all three APIs, whole and streamed."""
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 6}}, "required": ["city"],
        "additionalProperties": False}}}
    finishes = set()
    for max_tokens in range(1, 13):
        body = json.loads(chat_body("a", "Weather?", max_tokens=max_tokens, temperature=0, tools=[tool],
                                    tool_choice={"type": "function", "function": {"name": "get_weather"}}))
        status, reply = _post(server, "/v1/chat/completions", body)
        choice = reply["choices"][0]
        finishes.add(choice["finish_reason"])
        if choice["finish_reason"] == "length":
            assert not choice["message"].get("tool_calls") and "<tool_call>" not in (choice["message"]["content"] or "")
        else:
            assert choice["finish_reason"] == "tool_calls" and len(choice["message"]["tool_calls"]) == 1
        stream = server.client().chat.completions.create(stream=True, **{k: v for k, v in body.items()})
        chunks = [c for c in stream if c.choices]
        assert [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason] == [choice["finish_reason"]]
        status, message = _post(server, "/v1/messages", {
            "model": "a", "max_tokens": max_tokens, "temperature": 0, "messages": [{"role": "user", "content": "Weather?"}],
            "tools": [{"name": "get_weather", "input_schema": tool["function"]["parameters"]}],
            "tool_choice": {"type": "tool", "name": "get_weather"}})
        kinds = [block["type"] for block in message["content"]]
        assert message["stop_reason"] == ("max_tokens" if choice["finish_reason"] == "length" else "tool_use"), message
        assert ("tool_use" in kinds) == (message["stop_reason"] == "tool_use")
    assert finishes == {"length", "tool_calls"}  # both cases were met


def test_anthropic_stop_sequence_names_the_one_that_matched_among_several(server):
    ask = {"model": "a", "max_tokens": 30, "temperature": 0, "messages": [{"role": "user", "content": "hi"}]}
    status, whole = _post(server, "/v1/messages", ask)
    text = whole["content"][0]["text"]
    stop = text[12:15]
    for given in ([stop, "\u2603never"], ["\u2603never", stop, "\u2603neither"]):
        status, reply = _post(server, "/v1/messages", {**ask, "stop_sequences": given})
        assert reply["stop_reason"] == "stop_sequence" and reply["stop_sequence"] == stop, reply
    client = anthropic.Anthropic(base_url=server.url, api_key="none", max_retries=0)
    events = client.messages.create(model="a", max_tokens=30, messages=ask["messages"], stream=True,
                                    stop_sequences=["\u2603never", stop], extra_body={"temperature": 0})
    deltas = [e.delta for e in events if e.type == "message_delta"]
    assert [(d.stop_reason, d.stop_sequence) for d in deltas] == [("stop_sequence", stop)]


def test_count_tokens_counts_a_prompt_longer_than_the_context(server):
    long = "word " * 3000  # about 3,000 tokens; the context holds 1,024
    status, reply = _post(server, "/v1/messages/count_tokens",
                          {"model": "a", "messages": [{"role": "user", "content": long}]})
    assert status == 200 and reply["input_tokens"] > 2000, reply
    status, reply = _post(server, "/v1/messages", {"model": "a", "max_tokens": 4,
                                                   "messages": [{"role": "user", "content": long}]})
    assert status == 400 and reply["type"] == "error"  # generating it is still refused


def test_a_regex_error_says_what_is_wrong_with_the_pattern(server):
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "strict": True, "schema": {
        "type": "object", "properties": {"code": {"type": "string", "pattern": "(unclosed"}}, "required": ["code"]}}}
    status, reply = _post(server, "/v1/chat/completions", json.loads(chat_body("a", "x", max_tokens=4, response_format=fmt)))
    message = reply["error"]["message"]
    assert status == 400 and "unclosed group" in message and "(unclosed" in message, message


def test_a_tool_schema_error_names_the_tool_not_a_line_of_the_servers_grammar(server):
    tools = [WEATHER, {"type": "function", "function": {"name": "pick", "strict": True, "parameters": {
        "type": "object", "properties": {"ids": {"type": "array", "uniqueItems": True}}}}}]
    status, reply = _post(server, "/v1/chat/completions", json.loads(chat_body("a", "x", max_tokens=4, tools=tools)))
    error = reply["error"]
    assert status == 400 and error["param"] == "tools[1].function.parameters", error
    assert "uniqueItems" in error["message"] and "start:" not in error["message"] and "args_" not in error["message"]


@pytest.mark.parametrize("value", [0, "ten", 2.5])
def test_responses_errors_name_the_responses_fields(server, value):
    status, reply = _post(server, "/v1/responses", {"model": "a", "input": "hi", "max_output_tokens": value})
    error = reply["error"]
    assert status == 400 and error["param"] == "max_output_tokens" and "max_output_tokens" in error["message"], error
    assert "'max_tokens'" not in error["message"]


def test_anthropic_errors_name_anthropics_fields(server):
    status, reply = _post(server, "/v1/messages", {"model": "a", "max_tokens": 2, "stop_sequences": "x" * 3 + "y",
                                                   "messages": [{"role": "user", "content": "hi"}]})
    assert status == 200  # one string is taken, as the chat route takes it
    status, reply = _post(server, "/v1/messages", {"model": "a", "max_tokens": 2, "stop_sequences": [1, 2],
                                                   "messages": [{"role": "user", "content": "hi"}]})
    assert status == 400 and reply["type"] == "error" and "'stop_sequences'" in reply["error"]["message"], reply
