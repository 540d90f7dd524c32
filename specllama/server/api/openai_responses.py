"""POST /v1/responses (OpenAI's Responses API, what Codex-style clients speak), for text and
function calls, whole or streamed: the request turned into the chat request parse_chat checks, the
answer written back as a Response object or its stream of typed events.

The server keeps no state between requests, so `previous_response_id`, `conversation` and
`background` are refused: a client sends the whole conversation as `input` items (messages,
function_call, function_call_output), as Codex does, with `store: false`. A `namespace` tool's
functions are offered as function tools and their calls answered with `namespace` set; tools only
OpenAI's servers run (web_search, file_search, computer_use, ...) are left out of the prompt;
`developer` messages are system turns; `text.format` is the chat API's response_format. What only
tunes the hosted service (HOSTED_FIELDS: reasoning, include, prompt_cache_key ...) is ignored.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

from starlette.requests import Request
from starlette.responses import Response

from specllama.decoding.events import DoneEvent, Summary, TokenEvent
from specllama.dialects import Reasoning
from specllama.server.api_errors import APIError, invalid, renamed
from specllama.server.exchange import (
    KEEP_ALIVE_COMMENT,
    ServerState,
    SessionTemplate,
    answer,
    checked,
    prepare_request,
    refuse_if_draining,
)
from specllama.server.ignored import note
from specllama.server.schema import Job, parse_chat
from specllama.server.tool_calls import ToolCall
from specllama.server.writer import AnswerParts, sse

ROLES = ("user", "system", "developer", "assistant")
ROUTE = "/v1/responses"
RESPONSES_NAMES = {"max_tokens": "max_output_tokens", "messages": "input"}
# Fields that tune OpenAI's hosted service and leave the answer's meaning as it is: taken and
# ignored (said once at -v). Codex sends most of them on every request.
HOSTED_FIELDS = {
    "reasoning": "no reasoning effort or summary here: the model's chat template decides whether it reasons",
    "include": "nothing extra to include: no encrypted reasoning or hosted-tool output is made here",
    "store": "this server keeps no responses",
    "prompt_cache_key": "the server reuses a cached prompt prefix by itself, whatever the key",
    "client_metadata": "only OpenAI's own records use it",
    "metadata": "only OpenAI's own records use it",
    "service_tier": "one tier here",
    "safety_identifier": "only OpenAI's own records use it",
    "user": "only OpenAI's own records use it",
    "truncation": "the conversation is never truncated here: a prompt over the context is refused",
    "max_tool_calls": "not counted here",
}
HOSTED_ITEMS = ("web_search_call", "file_search_call", "computer_call", "computer_call_output", "code_interpreter_call",
                "image_generation_call", "mcp_call", "mcp_list_tools", "local_shell_call", "local_shell_call_output")


@dataclass(frozen=True)
class Names:
    """Function names as the prompt offers them and as the client expects them back: a function
    of a `namespace` tool is offered by its own name (its namespace's name first where two would
    clash), and its calls go back with `name` and `namespace` apart, as Codex reads them."""

    to_client: dict[str, tuple[str | None, str]] = field(default_factory=dict)  # prompt name -> (namespace, name)

    def prompt_name(self, namespace: object, name: object) -> object:
        if not namespace:
            return name
        for offered, (ns, inner) in self.to_client.items():
            if ns == namespace and inner == name:
                return offered
        return f"{namespace}.{name}"

    def call_fields(self, offered: str) -> dict:
        namespace, name = self.to_client.get(offered, (None, offered))
        return {"name": name, "namespace": namespace} if namespace else {"name": name}


def chat_request(body: object) -> dict:
    return parse(body)[0]


def parse(body: object) -> tuple[dict, Names]:
    """The Responses request as an OpenAI chat request (for parse_chat), and how its function
    names map back to the client's."""
    if not isinstance(body, dict):
        raise invalid("the request body must be a JSON object")
    for name in ("previous_response_id", "conversation"):
        if body.get(name):
            raise invalid(f"{name} is not supported: this server keeps no responses; send the whole "
                          "conversation as 'input'", name)
    if body.get("background"):
        raise invalid("background responses are not supported: this server answers while the request is open",
                      "background")
    if body.get("prompt") is not None:
        raise invalid("'prompt' (a stored prompt template) is not supported: send 'instructions' and 'input'", "prompt")
    for name, why in HOSTED_FIELDS.items():
        if body.get(name) is not None:
            note(ROUTE, f"'{name}' ignored", why)
    tools, names = _tools(body.get("tools"))
    messages = []
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        messages.append({"role": "system", "content": body["instructions"]})
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise invalid("'input' must be a string or a non-empty array of items", "input")
    for i, item in enumerate(items):
        _item(item, messages, names, f"input[{i}]")
    out = {"model": body.get("model"), "messages": _leading_system_merged(messages), "stream": body.get("stream", False)}
    for name in ("temperature", "top_p", "drafter", "k"):
        if body.get(name) is not None:
            out[name] = body[name]
    if body.get("max_output_tokens") is not None:
        out["max_tokens"] = body["max_output_tokens"]
    response_format = _text_format(body.get("text"))
    if response_format is not None:
        out["response_format"] = response_format
    if tools:
        out["tools"] = tools
        out["tool_choice"] = _tool_choice(body.get("tool_choice"))
        if body.get("parallel_tool_calls") is not None:
            out["parallel_tool_calls"] = body["parallel_tool_calls"]
    return out, names


def _leading_system_merged(messages: list[dict]) -> list[dict]:
    """`instructions` and the developer / system messages before the first other turn (Codex sends
    two) as one system turn: chat templates put the tool list into the first one only."""
    lead = 0
    while lead < len(messages) and messages[lead]["role"] in ("system", "developer"):
        lead += 1
    if lead < 2:
        return messages
    merged = "\n\n".join(m["content"] for m in messages[:lead] if m["content"])
    return [{"role": "system", "content": merged}] + messages[lead:]


def _text_format(text: object) -> dict | None:
    """`text.format` as the chat API's response_format (`text.verbosity` only tunes a hosted model)."""
    if text is None:
        return None
    if not isinstance(text, dict):
        raise invalid("'text' must be an object such as {\"format\": {\"type\": \"text\"}}", "text")
    if text.get("verbosity") is not None:
        note(ROUTE, "'text.verbosity' ignored", "the model answers at its own length")
    spec = text.get("format")
    if spec is None:
        return None
    if not isinstance(spec, dict) or spec.get("type") not in ("text", "json_object", "json_schema"):
        raise invalid("'text.format.type' must be 'text', 'json_object' or 'json_schema'", "text.format")
    if spec["type"] != "json_schema":
        return {"type": spec["type"]}
    schema = {key: spec[key] for key in ("name", "schema", "strict") if key in spec}
    return {"type": "json_schema", "json_schema": schema}


def _item(item: object, messages: list[dict], names: Names, where: str) -> None:
    if not isinstance(item, dict):
        raise invalid(f"{where} must be an object", where)
    kind = item.get("type", "message")
    if kind == "message":
        if item.get("role") not in ROLES:
            raise invalid(f"{where}.role must be one of {', '.join(ROLES)}", f"{where}.role")
        messages.append({"role": item["role"], "content": _text(item.get("content"), f"{where}.content")})
    elif kind in ("function_call", "custom_tool_call"):
        for name in ("call_id", "arguments"):
            if item.get(name) is not None and not isinstance(item.get(name), str):
                raise invalid(f"{where}.{name} must be a string", f"{where}.{name}")
        arguments = (item.get("arguments") or "{}") if kind == "function_call" else json.dumps({"input": item.get("input")})
        call = {"id": item.get("call_id") or "", "type": "function",
                "function": {"name": names.prompt_name(item.get("namespace"), item.get("name")), "arguments": arguments}}
        if messages and messages[-1]["role"] == "assistant":
            messages[-1].setdefault("tool_calls", []).append(call)
        else:
            messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
    elif kind in ("function_call_output", "custom_tool_call_output"):
        output = item.get("output")
        messages.append({"role": "tool", "tool_call_id": item.get("call_id") or "",
                         "content": output if isinstance(output, str) else _text(output, f"{where}.output")})
    elif kind in HOSTED_ITEMS:
        note(ROUTE, f"'{kind}' items left out", "the record of a tool OpenAI's servers ran", always=True)
    elif kind != "reasoning":  # another model's reasoning summary: not for this one's template
        raise invalid(f"{where}: '{kind}' items are not supported (message, function_call and "
                      "function_call_output are)", where)


def _text(content: object, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") in TEXT_PARTS
                                         and isinstance(p.get("text", ""), str) for p in content):
        return "\n".join(p.get("text") or p.get("refusal") or "" for p in content)  # as llama.cpp joins parts
    raise invalid(f"{where} must be a string or text parts (input_text, output_text)", where)


TEXT_PARTS = ("input_text", "output_text", "text", "refusal")


def _tools(tools: object) -> tuple[list[dict], Names]:
    """Function tools as the chat API's, a namespace tool's functions among them; tools only
    OpenAI's servers run (web_search, file_search, computer_use, ...) left out with a log line."""
    if tools is None:
        return [], Names()
    if not isinstance(tools, list):
        raise invalid("'tools' must be an array", "tools")
    out, names = [], Names()
    plain = {t["name"] for t in tools if isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("name"), str)}
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind == "function":
            out.append(_function(tool, where))
            names.to_client[tool["name"]] = (None, tool["name"])
        elif kind == "namespace" and isinstance(tool.get("name"), str) and isinstance(tool.get("tools"), list):
            for j, inner in enumerate(tool["tools"]):
                function = _function(inner, f"{where}.tools[{j}]")
                name = function["function"]["name"]
                offered = name if name not in plain and name not in names.to_client else f"{tool['name']}.{name}"
                function["function"]["name"] = offered
                out.append(function)
                names.to_client[offered] = (tool["name"], name)
        elif isinstance(kind, str) and kind != "namespace":
            note(ROUTE, f"tool type '{kind}' left out", "OpenAI's servers run it (or it is not a function); this "
                 "server offers function tools only", always=True)
        else:
            raise invalid(f"{where} must be {{\"type\": \"function\", \"name\": ..., \"parameters\": {{...}}}} or a "
                          "namespace of them", where)
    return out, names


def _function(tool: object, where: str) -> dict:
    if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("name"), str):
        raise invalid(f"{where} must be {{\"type\": \"function\", \"name\": ..., \"parameters\": {{...}}}}", where)
    for name, kind in (("parameters", dict), ("description", str)):
        if tool.get(name) is not None and not isinstance(tool.get(name), kind):
            raise invalid(f"{where}.{name} must be {'a JSON schema object' if kind is dict else 'a string'}",
                          f"{where}.{name}")
    function = {"name": tool["name"], "description": tool.get("description") or "",
                "parameters": tool.get("parameters") or {"type": "object"}}
    if tool.get("strict"):
        function["strict"] = True
    return {"type": "function", "function": function}


def _tool_choice(choice: object) -> object:
    if choice is None or isinstance(choice, str):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    raise invalid("'tool_choice' must be auto, none, required or {\"type\": \"function\", \"name\": ...}", "tool_choice")


class ResponsesWriter:
    """The answer as a Response object, or as response.created ... response.completed."""

    def __init__(self, job: Job, model: str, names: Names | None = None):
        self.job = job
        self.names = names or Names()
        self.model = model
        self.id = "resp_" + uuid.uuid4().hex[:24]
        self.created = int(time.time())
        self.parts = AnswerParts(job)
        self.sequence = 0
        self.output: list[dict] = []  # finished items
        self.message: dict | None = None  # the message item being written
        self.reasoning: dict | None = None  # the reasoning item being written
        self.text = ""

    def _response(self, status: str, output: list[dict], summary: Summary | None) -> dict:
        out = {"id": self.id, "object": "response", "created_at": self.created, "status": status, "model": self.model,
               "output": output, "error": None, "incomplete_details": None, "instructions": None, "metadata": {},
               "parallel_tool_calls": self.job.tools.parallel if self.job.tools else True, "tool_choice": "auto",
               "tools": [], "temperature": self.job.config.sampling.temperature, "top_p": self.job.config.sampling.top_p,
               "usage": None}
        if summary is not None:
            if summary.finish_reason in ("length", "context"):
                out["status"] = "incomplete"
                out["incomplete_details"] = {"reason": "max_output_tokens"}
            out["usage"] = {"input_tokens": summary.prompt_tokens,
                            "input_tokens_details": {"cached_tokens": summary.reused_tokens},
                            "output_tokens": summary.tokens, "output_tokens_details": {"reasoning_tokens": 0},
                            "total_tokens": summary.prompt_tokens + summary.tokens}
        return out

    def whole(self, summary: Summary, tokens: list[TokenEvent]) -> dict:
        text, calls = self.parts.whole(summary)
        output = [_reasoning(self.parts.reasoning)] if self.parts.reasoning else []
        output += [_message(text, "completed")] if text else []
        output += [_function_call(call, "completed", self.names) for call in calls]
        return self._response("completed", output, summary)

    def _event(self, kind: str, **fields) -> str:
        self.sequence += 1
        return sse({"type": kind, "sequence_number": self.sequence, **fields}, kind)

    def opening(self) -> list[str]:
        response = self._response("in_progress", [], None)
        out = [self._event("response.created", response=response), self._event("response.in_progress", response=response)]
        return out + self._parts(self.parts.first())

    def keep_alive(self) -> list[str]:
        """Before any output (a long prompt's prefill): response.in_progress again, an event that clients timing
        out on silence count (Codex's stream_idle_timeout) and that says nothing new; once output has begun,
        a comment, so that no client sees the response's state go back."""
        if self.output or self.message is not None or self.reasoning is not None:
            return [KEEP_ALIVE_COMMENT]
        return [self._event("response.in_progress", response=self._response("in_progress", [], None))]

    def token(self, event: TokenEvent) -> list[str]:
        return self._parts(self.parts.feed(event.text))

    def done(self, event: DoneEvent) -> list[str]:
        out = self._parts(self.parts.end(event.text, event.summary)) + self._close_reasoning() + self._close_message()
        if event.summary.finish_reason == "cancelled":
            return out + self.failed(APIError(503, "the server is shutting down: the answer is incomplete"))
        response = self._response("completed", self.output, event.summary)
        kind = "response.completed" if response["status"] == "completed" else "response.incomplete"
        return out + [self._event(kind, response=response)]

    def failed(self, error: APIError) -> list[str]:
        return [self._event("error", code=error.code or str(error.status), message=error.message, param=error.param)]

    def _parts(self, parts: list) -> list[str]:
        out = []
        for part in parts:
            if isinstance(part, Reasoning):
                out += self._close_message()
                if self.reasoning is None:
                    self.reasoning = _reasoning("")
                    out.append(self._event("response.output_item.added", output_index=len(self.output),
                                           item={**self.reasoning, "status": "in_progress"}))
                self.reasoning["content"][0]["text"] += part.text
                out.append(self._event("response.reasoning_text.delta", item_id=self.reasoning["id"],
                                       output_index=len(self.output), content_index=0, delta=part.text))
                continue
            out += self._close_reasoning()
            if isinstance(part, str):
                out += self._open_message()
                self.text += part
                out.append(self._event("response.output_text.delta", item_id=self.message["id"],
                                       output_index=len(self.output), content_index=0, delta=part, logprobs=[]))
            else:
                out += self._close_message()
                item = _function_call(part, "in_progress", self.names)
                index = len(self.output)
                out.append(self._event("response.output_item.added", output_index=index, item={**item, "arguments": ""}))
                out.append(self._event("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                                       delta=part.arguments))
                out.append(self._event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                                       arguments=part.arguments))
                item["status"] = "completed"
                self.output.append(item)
                out.append(self._event("response.output_item.done", output_index=index, item=item))
        return out

    def _close_reasoning(self) -> list[str]:
        if self.reasoning is None:
            return []
        item, self.reasoning = self.reasoning, None
        index = len(self.output)
        self.output.append(item)
        return [self._event("response.reasoning_text.done", item_id=item["id"], output_index=index, content_index=0,
                            text=item["content"][0]["text"]),
                self._event("response.output_item.done", output_index=index, item=item)]

    def _open_message(self) -> list[str]:
        if self.message is not None:
            return []
        self.message = _message("", "in_progress")
        self.message["content"] = []
        index = len(self.output)
        part = {"type": "output_text", "text": "", "annotations": []}
        return [self._event("response.output_item.added", output_index=index, item=self.message),
                self._event("response.content_part.added", item_id=self.message["id"], output_index=index,
                            content_index=0, part=part)]

    def _close_message(self) -> list[str]:
        if self.message is None:
            return []
        index = len(self.output)
        item = {**_message(self.text, "completed"), "id": self.message["id"]}
        part = item["content"][0]
        self.output.append(item)
        self.message, self.text = None, ""
        return [self._event("response.output_text.done", item_id=item["id"], output_index=index, content_index=0,
                            text=part["text"], logprobs=[]),
                self._event("response.content_part.done", item_id=item["id"], output_index=index, content_index=0,
                            part=part),
                self._event("response.output_item.done", output_index=index, item=item)]


def _message(text: str, status: str) -> dict:
    return {"type": "message", "id": "msg_" + uuid.uuid4().hex[:24], "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def _reasoning(text: str) -> dict:
    """The answer's thinking as a Responses reasoning item (its text as reasoning_text content)."""
    return {"type": "reasoning", "id": "rs_" + uuid.uuid4().hex[:24], "summary": [],
            "content": [{"type": "reasoning_text", "text": text}]}


def _function_call(call: ToolCall, status: str, names: Names) -> dict:
    return {"type": "function_call", "id": "fc_" + call.id.removeprefix("call_"), "call_id": call.id,
            **names.call_fields(call.name), "arguments": call.arguments, "status": status}


def handler(state: ServerState):
    """OpenAI's Responses API: the request as a chat request, the answer as a Response."""
    async def handle(request: Request) -> Response:
        refuse_if_draining(state)
        try:
            job, names = await prepare_request(state, request, lambda body, stop: _parse_responses(state, body, stop))
        except APIError as e:
            raise renamed(e, RESPONSES_NAMES) from None
        return await answer(state, request, job, ResponsesWriter(job, state.served.name, names))

    return handle


def _parse_responses(state: ServerState, body: object, stop: Callable[[], bool]) -> tuple[Job, Names]:
    chat, names = parse(body)
    return checked(state, lambda: parse_chat(chat, state.served, SessionTemplate(state.runtime, stop)), "input"), names
