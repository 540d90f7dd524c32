"""What real agent clients send, replayed against `serve` (tiny models): the requests captured from
Claude Code, Codex, OpenCode, Qwen Code and aider (tests/fixtures/clients/, README there) are
accepted, answered in their API's shape, and streamed to the same answer as a whole request gives.
A tiny model writes noise: what the answer says is not checked here, only that it is one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specllama.server.api import anthropic as anthropic_api
from specllama.server.api import openai_responses
from tests.support.live_serve import LiveServer
from tests.support.tiny_gguf import write_tiny_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "clients"
CAPTURED = sorted(FIXTURES.glob("*.json"))
MAX_TOKENS = 24


def _fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


@pytest.fixture(scope="module")
def server(tokenizer_sources, tmp_path_factory):
    """A tiny Qwen-tokenizer model with room for the captured prompts (a few thousand tokens), -v
    so the ignored fields are said; --max-tokens keeps Claude Code's 128000 short. No drafter: a
    tiny random model's logits are near ties everywhere, and a verify batch's shape (which depends on
    what the drafter learnt from earlier answers) could flip one; speculation is tested elsewhere."""
    folder = tmp_path_factory.mktemp("clients")
    model = write_tiny_model(folder / "long.gguf", tokenizer_sources["qwen"], n_ctx=8192, seed=3)
    live = LiveServer(["--target", str(model), "--drafter", "none", "--ctx", "8192", "--parallel", "1",
                       "--max-tokens", str(MAX_TOKENS), "--temp", "0", "-v"], folder / "serve.log")
    yield live
    assert live.stop() == 0, live.stderr()[-3000:]
    assert "Traceback" not in live.stderr()


def _target(record: dict) -> str:
    query = "&".join(f"{k}={v[0]}" for k, v in record.get("query", {}).items())
    return record["path"] + ("?" + query if query else "")


def _post(server, record: dict, body: dict) -> tuple[int, dict, bytes]:
    headers = {k: v for k, v in record["headers"].items() if k.lower() not in ("content-type",)}
    return server.request("POST", _target(record), json.dumps(body).encode(), headers=headers)


def _events(raw: bytes) -> list[tuple[str | None, object]]:
    """A server-sent event stream as (event name, data), data parsed from JSON where it is."""
    out = []
    for chunk in raw.decode().split("\n\n"):
        name, data = None, None
        for line in chunk.splitlines():
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                data = line[len("data: "):]
        if data is not None:
            out.append((name, data if data == "[DONE]" else json.loads(data)))
    return out


# --- each shape: the whole answer, and the stream folded back into one ----------------------------

def _anthropic_whole(reply: dict) -> dict:
    assert reply["type"] == "message" and reply["role"] == "assistant", reply
    assert reply["stop_reason"] in ("end_turn", "max_tokens", "tool_use", "stop_sequence"), reply
    assert set(reply["usage"]) >= {"input_tokens", "output_tokens", "cache_read_input_tokens"}
    return {"content": [_block(b) for b in reply["content"]], "stop": reply["stop_reason"]}


def _block(block: dict) -> dict:
    return {"type": block["type"], "text": block["text"]} if block["type"] == "text" else \
        {"type": block["type"], "name": block["name"], "input": block["input"]}


def _anthropic_streamed(events: list) -> dict:
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-1] == "message_stop", names
    assert all(name == data["type"] for name, data in events), "each event's name is its data's type"
    blocks, stop = [], None
    for name, data in events:
        if name == "content_block_start":
            blocks.append({**data["content_block"], "json": ""})
        elif name == "content_block_delta":
            delta = data["delta"]
            if delta["type"] == "text_delta":
                blocks[data["index"]]["text"] += delta["text"]
            else:
                blocks[data["index"]]["json"] += delta["partial_json"]
        elif name == "message_delta":
            stop = data["delta"]["stop_reason"]
    for block in blocks:
        if block["type"] == "tool_use":
            block["input"] = json.loads(block["json"])
    return {"content": [_block(b) for b in blocks], "stop": stop}


def _responses_whole(reply: dict) -> dict:
    assert reply["object"] == "response" and reply["status"] in ("completed", "incomplete"), reply
    assert set(reply["usage"]) >= {"input_tokens", "output_tokens", "total_tokens"}
    return {"output": [_item(i) for i in reply["output"]], "status": reply["status"]}


def _item(item: dict) -> dict:
    if item["type"] == "message":
        return {"type": "message", "text": "".join(p["text"] for p in item["content"])}
    return {k: item.get(k) for k in ("type", "name", "namespace", "arguments")}


def _responses_streamed(events: list) -> dict:
    kinds = [name for name, _ in events]
    assert kinds[:2] == ["response.created", "response.in_progress"], kinds
    assert kinds[-1] in ("response.completed", "response.incomplete"), kinds
    final = events[-1][1]["response"]
    text = "".join(data["delta"] for name, data in events if name == "response.output_text.delta")
    messages = [i for i in final["output"] if i["type"] == "message"]
    assert text == "".join(p["text"] for i in messages for p in i["content"])
    return _responses_whole(final)


def _chat_whole(reply: dict) -> dict:
    assert reply["object"] == "chat.completion", reply
    choice = reply["choices"][0]
    message = choice["message"]
    calls = [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or []]
    return {"content": message["content"] or "", "calls": calls, "finish": choice["finish_reason"]}


def _chat_streamed(events: list, usage: bool) -> dict:
    assert events[-1][1] == "[DONE]"
    chunks = [data for _, data in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    if usage:  # stream_options.include_usage: a last chunk with no choices and the usage
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] > 0
    content, calls, finish = "", {}, None
    for chunk in chunks:
        for choice in chunk["choices"]:
            delta = choice["delta"]
            content += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                entry = calls.setdefault(call["index"], ["", ""])
                entry[0] += (call.get("function") or {}).get("name") or ""
                entry[1] += (call.get("function") or {}).get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    return {"content": content, "calls": [tuple(c) for c in calls.values()], "finish": finish}


def _shapes(record: dict):
    path = record["path"]
    if path.endswith("/messages"):
        return _anthropic_whole, _anthropic_streamed
    if path.endswith("/responses"):
        return _responses_whole, _responses_streamed
    usage = bool((record["body"].get("stream_options") or {}).get("include_usage"))
    return _chat_whole, lambda events: _chat_streamed(events, usage)


@pytest.mark.parametrize("fixture", CAPTURED, ids=[p.stem for p in CAPTURED])
def test_a_captured_client_request_is_answered_in_its_apis_shape_streamed_as_whole(server, fixture):
    record = json.loads(fixture.read_text())
    whole_shape, streamed_shape = _shapes(record)
    # First the prompt alone, so that the whole and the streamed answer both start from it cached
    # (a prompt's last token computed alone or in a long batch can differ in the last bits: a near
    # tie of the tiny model's could then flip).
    status, _, raw = _post(server, record, {**record["body"], "stream": False, "max_tokens": 1,
                                            "max_output_tokens": 1})
    assert status == 200, raw[:2000]
    status, _, raw = _post(server, record, {**record["body"], "stream": False})
    assert status == 200, raw[:2000]
    whole = whole_shape(json.loads(raw))
    assert record["body"].get("stream"), "every client captured streams"
    status, headers, raw = _post(server, record, record["body"])
    assert status == 200 and headers["content-type"].startswith("text/event-stream"), raw[:2000]
    assert streamed_shape(_events(raw)) == whole


def test_the_fixtures_cover_every_client_and_their_two_first_requests():
    clients = {json.loads(p.read_text())["client"].split()[0] for p in CAPTURED}
    assert clients == {"claude-code", "codex-cli", "opencode", "qwen-code", "aider"}
    assert (FIXTURES / "README.md").exists()


# --- what the translation makes of them -----------------------------------------------------------

def test_claude_codes_system_message_joins_the_system_turn_and_deferred_tools_stay_out():
    body = _fixture("claude-code-2.json")["body"]
    inside = next(m for m in body["messages"] if m["role"] == "system")["content"]  # after the first user turn
    inside = inside if isinstance(inside, str) else inside[0]["text"]
    chat = anthropic_api.chat_request(body)
    roles = [m["role"] for m in chat["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    system = chat["messages"][0]["content"]
    assert inside in system
    assert system.index(body["system"][1]["text"]) < system.index(inside)  # in order
    assert "x-anthropic-billing-header" not in system
    names = [t["function"]["name"] for t in chat["tools"]]
    assert "DeferredToolPlaceholder" not in names and {"Bash", "Read", "Edit", "ToolSearch"} <= set(names)
    # Claude Code's text blocks stay apart, as llama.cpp joins them, not glued tag to tag
    assert chat["messages"][1]["content"] == "\n".join(b["text"] for b in body["messages"][0]["content"])


def test_tool_search_loads_a_deferred_tool_and_system_blocks_add_and_remove_tools():
    deferred = {"name": "NotebookEdit", "description": "Edit a notebook.", "input_schema": {"type": "object"},
                "defer_loading": True}
    bash = {"name": "Bash", "description": "Run.", "input_schema": {"type": "object"}}
    turns = [{"role": "user", "content": "Edit the notebook."},
             {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "ToolSearch",
                                                "input": {"query": "notebook"}}]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                           "content": [{"type": "tool_reference", "tool_name": "NotebookEdit"}]}]}]
    names = [t["function"]["name"] for t in anthropic_api.chat_request({"messages": turns,
                                                                        "tools": [bash, deferred]})["tools"]]
    assert names == ["Bash", "NotebookEdit"]
    change = {"role": "system", "content": [
        {"type": "tool_removal", "tool": {"type": "tool_reference", "name": "Bash"}},
        {"type": "tool_addition", "tool": {"type": "tool_definition", "definition": {
            "name": "Grep", "description": "Search.", "input_schema": {"type": "object"}}}}]}
    chat = anthropic_api.chat_request({"messages": turns[:1] + [change], "tools": [bash, deferred]})
    assert [t["function"]["name"] for t in chat["tools"]] == ["Grep"]


def test_fields_that_change_the_answer_are_refused_or_honoured():
    ask = [{"role": "user", "content": "hi"}]
    with pytest.raises(Exception) as e:
        anthropic_api.chat_request({"messages": ask, "mcp_servers": [{"type": "url", "url": "https://x", "name": "x"}]})
    assert e.value.status == 400 and e.value.param == "mcp_servers"
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    chat = anthropic_api.chat_request({"messages": ask, "output_config": {"effort": "high", "format": {
        "type": "json_schema", "schema": schema}}})
    assert chat["response_format"]["json_schema"]["schema"] == schema
    chat = openai_responses.chat_request({"input": "hi", "text": {"format": {"type": "json_schema", "name": "x",
                                                                               "schema": schema}}})
    assert chat["response_format"] == {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    for field, value in (("background", True), ("conversation", "conv_1")):
        with pytest.raises(Exception) as e:
            openai_responses.chat_request({"input": "hi", field: value})
        assert e.value.status == 400 and e.value.param == field


def test_codex_namespace_tools_are_flattened_and_hosted_tools_left_out():
    body = _fixture("codex-2.json")["body"]
    chat, names = openai_responses.parse(body)
    offered = [t["function"]["name"] for t in chat["tools"]]
    namespace = next(t for t in body["tools"] if t["type"] == "namespace")
    assert [t["name"] for t in namespace["tools"]] == [n for n in offered if n != "exec_command"]
    assert not any(t["type"] == "web_search" for t in chat["tools"])
    assert names.call_fields("wait_agent") == {"name": "wait_agent", "namespace": namespace["name"]}
    assert names.call_fields("exec_command") == {"name": "exec_command"}
    # Codex sends the namespaced call back with its namespace: it renders under the name offered
    call = next(m for m in chat["messages"] if m.get("tool_calls"))["tool_calls"][0]
    assert call["function"]["name"] == "wait_agent"
    # the two developer messages are one system turn, ahead of the user's
    assert [m["role"] for m in chat["messages"]][:2] == ["system", "user"]


def test_a_namespaced_function_clashing_with_a_plain_one_is_offered_under_its_namespace():
    tools = [{"type": "function", "name": "close", "parameters": {"type": "object"}},
             {"type": "namespace", "name": "agents", "description": "Agents.",
              "tools": [{"type": "function", "name": "close", "parameters": {"type": "object"}}]}]
    chat, names = openai_responses.parse({"input": "hi", "tools": tools})
    assert [t["function"]["name"] for t in chat["tools"]] == ["close", "agents.close"]
    assert names.call_fields("agents.close") == {"name": "close", "namespace": "agents"}


def test_a_forced_namespaced_call_goes_back_with_its_namespace_whole_and_streamed(server):
    tools = [{"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.",
              "tools": [{"type": "function", "name": "list_agents", "strict": True,
                         "parameters": {"type": "object", "properties": {}, "additionalProperties": False}}]}]
    body = {"model": "x", "input": "List the agents.", "tools": tools,
            "tool_choice": {"type": "function", "name": "list_agents"}}
    record = {"path": "/v1/responses", "headers": {}}
    status, _, raw = _post(server, record, body)
    assert status == 200, raw
    calls = [i for i in json.loads(raw)["output"] if i["type"] == "function_call"]
    assert [(c["name"], c["namespace"], json.loads(c["arguments"])) for c in calls] == [
        ("list_agents", "multi_agent_v1", {})]
    status, _, raw = _post(server, record, {**body, "stream": True})
    added = [d["item"] for name, d in _events(raw) if name == "response.output_item.added"]
    assert [(i["name"], i["namespace"]) for i in added] == [("list_agents", "multi_agent_v1")]


def test_ignored_fields_and_left_out_tools_are_said_once(server):
    for name in ("claude-code-1.json", "claude-code-1.json", "codex-1.json"):
        record = _fixture(name)
        status, _, raw = _post(server, record, {**record["body"], "stream": False, "max_tokens": 1,
                                                "max_output_tokens": 1})
        assert status == 200, raw
    chat = {"model": "x", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}],
            "reasoning_effort": "low", "store": False, "prompt_cache_key": "k"}
    for _ in range(2):
        status, _, raw = server.request("POST", "/v1/chat/completions", json.dumps(chat).encode())
        assert status == 200, raw
    log = server.stderr()
    # reasoning_effort is handed to the chat template (issue 38: GPT-OSS's reads it), so not said ignored
    assert "'reasoning_effort' ignored" not in log
    for line in ("/v1/chat/completions: 'store' ignored", "/v1/chat/completions: 'prompt_cache_key' ignored",
                 "/v1/messages: 'context_management' ignored", "/v1/messages: 'thinking' ignored",
                 "/v1/messages: 'output_config.effort' ignored", "/v1/responses: 'prompt_cache_key' ignored",
                 "/v1/responses: 'include' ignored", "/v1/responses: tool type 'web_search' left out"):
        assert log.count(line) == 1, (line, log[-3000:])


def test_a_prompt_over_the_context_says_so_in_each_apis_shape_with_the_option(server):
    long = "word " * 9000
    status, _, raw = server.request("POST", "/v1/messages?beta=true", json.dumps(
        {"model": "x", "max_tokens": 4, "messages": [{"role": "user", "content": long}]}).encode())
    error = json.loads(raw)
    assert status == 400 and error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    message = error["error"]["message"]
    assert message.startswith("prompt is too long: ") and "> 8192 maximum" in message and "-c 16384" in message
    status, _, raw = server.request("POST", "/v1/responses", json.dumps({"model": "x", "input": long}).encode())
    error = json.loads(raw)["error"]
    assert status == 400 and error["code"] == "context_length_exceeded" and "-c 16384" in error["message"]
