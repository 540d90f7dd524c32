"""POST /v1/messages (Anthropic's Messages API, what Claude Code and the `anthropic` package speak):
the request turned into the chat request parse_chat already checks, the answer written back in
Anthropic's shapes, whole or as its stream of named events (anthropic_writer.py).

Request: `system` (a string or text blocks), `messages` whose content is a string or blocks (text,
tool_use, tool_result), `role: "system"` messages among them (merged into the one system turn),
`tools` ({name, description, input_schema}, `defer_loading` ones offered once a tool_reference
names them), `tool_choice` (auto, any, tool with a name: that tool is forced, none;
`disable_parallel_tool_use`), `max_tokens`, `stop_sequences`, `temperature`, `top_p`, `top_k`,
`stream`, `output_config.format` (a JSON schema the answer follows). Tools of a named built-in type
(web_search_..., bash_...) are run by Anthropic's servers, not by a model here: they are left out.
What only tunes the hosted service (HOSTED_FIELDS, `output_config.effort`, `cache_control` on
blocks, the `anthropic-beta` header) is ignored; `mcp_servers`, which would change what the model
can do, is refused. Claude Code's per-request `x-anthropic-billing-header` system line is dropped:
it changes on every request, and in the prompt it would defeat the slot's prefix cache.
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from specllama.server.api.anthropic_writer import AnthropicWriter, error_body
from specllama.server.api_errors import APIError, invalid, renamed
from specllama.server.exchange import ServerState, SessionTemplate, answer, checked, prepare_request, refuse_if_draining
from specllama.server.ignored import note
from specllama.server.prepare import ClientGone, ServerStopping
from specllama.server.schema import Job, chat_prompt_tokens, parse_chat

BILLING_LINE = "x-anthropic-billing-header:"
ROUTE = "/v1/messages"
ANTHROPIC_NAMES = {"stop": "stop_sequences"}
# Fields that tune Anthropic's hosted service and leave the answer's meaning as it is: taken and
# ignored (said once at -v). The `anthropic-beta` header and the `?beta=true` query are not read at all.
HOSTED_FIELDS = {
    "metadata": "only Anthropic's own records use it",
    "thinking": "no thinking budget is set here: the model's chat template decides whether it reasons",
    "context_management": "Anthropic's server-side context editing: the whole conversation goes into the prompt",
    "cache_control": "the server reuses a cached prompt prefix by itself",
    "service_tier": "one tier here",
    "container": "the container of Anthropic's code execution tool, which does not run here",
    "inference_geo": "the model runs on this machine",
}


def chat_request(body: object) -> dict:
    """The Messages request as an OpenAI chat request (for parse_chat). `system` messages inside
    `messages` (Claude Code sends one after the first user turn) join the top-level `system` in
    the template's one system turn, in order; their tool_addition / tool_removal blocks, and
    tool_reference blocks in tool results, change the tools the prompt offers (tool search)."""
    if not isinstance(body, dict):
        raise invalid("the request body must be a JSON object")
    for name, why in HOSTED_FIELDS.items():
        if body.get(name) is not None:
            note(ROUTE, f"'{name}' ignored", why)
    if body.get("mcp_servers"):
        raise invalid("'mcp_servers' asks Anthropic's servers to run MCP tools, which this server cannot do: connect "
                      "the MCP servers in the client instead", "mcp_servers")
    prompt = _Prompt()
    prompt.system_content(body.get("system"), "system")
    turns = body.get("messages")
    if not isinstance(turns, list) or not turns:
        raise invalid("'messages' must be a non-empty array", "messages")
    for i, turn in enumerate(turns):
        where = f"messages[{i}]"
        if isinstance(turn, dict) and turn.get("role") == "system":
            prompt.system_content(turn.get("content"), f"{where}.content")
        else:
            prompt.messages += _turn(turn, where, prompt)
    system = "\n\n".join(text for text in prompt.system if text)
    messages = ([{"role": "system", "content": system}] if system else []) + prompt.messages
    out = {"model": body.get("model"), "messages": messages, "stream": body.get("stream", False)}
    for name in ("temperature", "top_p", "top_k", "drafter", "k"):
        if body.get(name) is not None:
            out[name] = body[name]
    if body.get("max_tokens") is not None:
        out["max_tokens"] = body["max_tokens"]
    if body.get("stop_sequences") is not None:
        out["stop"] = body["stop_sequences"]
    response_format = _output_format(body)
    if response_format is not None:
        out["response_format"] = response_format
    tools = prompt.tools(body.get("tools"))
    if tools:
        out["tools"] = tools
        choice = body.get("tool_choice") or {"type": "auto"}
        out["tool_choice"], parallel = _tool_choice(choice)
        out["parallel_tool_calls"] = parallel
    return out


class _Prompt:
    """What the request's system texts and turns add up to, and the tool changes they make."""

    def __init__(self):
        self.system: list[str] = []
        self.messages: list[dict] = []
        self.changes: list[tuple[str, object]] = []  # ("load" | "remove", name) or ("add", tool), in order

    def system_content(self, content: object, where: str) -> None:
        if content is None:
            return
        if isinstance(content, str):
            self.system.append(_without_billing(content))
            return
        if not isinstance(content, list):
            raise invalid(f"'{where}' must be a string or an array of text blocks", where)
        texts = []
        for j, block in enumerate(content):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                texts.append(_string(block, "text", f"{where}[{j}]"))
            elif kind in ("tool_addition", "tool_removal"):
                self._tool_change(kind, block.get("tool"), f"{where}[{j}].tool")
            else:
                raise invalid(f"{where}[{j}]: '{kind}' blocks are not supported in a system text (text, "
                              "tool_addition and tool_removal are)", f"{where}[{j}]")
        self.system.append(_without_billing("\n".join(texts)))

    def _tool_change(self, kind: str, tool: object, where: str) -> None:
        tool_type = tool.get("type") if isinstance(tool, dict) else None
        if tool_type == "tool_reference" and isinstance(tool.get("name"), str):
            self.changes.append(("load" if kind == "tool_addition" else "remove", tool["name"]))
        elif tool_type == "tool_definition" and kind == "tool_addition" and isinstance(tool.get("definition"), dict):
            self.changes.append(("add", tool["definition"]))
        else:
            raise invalid(f"'{where}' must be {{\"type\": \"tool_reference\", \"name\": ...}} or, to add a tool, "
                          "{\"type\": \"tool_definition\", \"definition\": {...}}", where)

    def tools(self, listed: object) -> list[dict]:
        """The tools the prompt offers: those listed without `defer_loading`, then the changes in
        order (a deferred tool joins when a tool_reference names it, as Anthropic's tool search does)."""
        if listed is not None and not isinstance(listed, list):
            raise invalid("'tools' must be an array", "tools")
        active: dict[str, dict] = {}
        deferred: dict[str, dict] = {}
        for i, tool in enumerate(listed or []):
            function = _tool(tool, f"tools[{i}]")
            if function is not None:
                (deferred if tool.get("defer_loading") else active)[function["function"]["name"]] = function
        for change, what in self.changes:
            if change == "add":
                function = _tool(what, "a tool_definition")
                if function is not None:
                    active[function["function"]["name"]] = function
            elif change == "load" and what in deferred:
                active[what] = deferred[what]
            elif change == "remove":
                active.pop(what, None)
        return list(active.values())


def _without_billing(text: str) -> str:
    lines = text.split("\n")
    return "\n".join(line for line in lines if not line.startswith(BILLING_LINE)).strip("\n")


def _output_format(body: dict) -> dict | None:
    """`output_config.format` (or the older `output_format`): a JSON schema the answer must follow,
    as the engine's response_format; `output_config.effort` tunes a hosted model and is ignored."""
    config = body.get("output_config")
    if config is not None and not isinstance(config, dict):
        raise invalid("'output_config' must be an object", "output_config")
    config = config or {}
    if config.get("effort") is not None:
        note(ROUTE, "'output_config.effort' ignored", "no effort setting here: the model answers as it does")
    spec = config.get("format") if config.get("format") is not None else body.get("output_format")
    if spec is None:
        return None
    param = "output_config.format" if config.get("format") is not None else "output_format"
    if not isinstance(spec, dict) or spec.get("type") != "json_schema" or not isinstance(spec.get("schema"), dict):
        raise invalid(f"'{param}' must be {{\"type\": \"json_schema\", \"schema\": {{...}}}}", param)
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": spec["schema"], "strict": True}}


def _turn(turn: object, where: str, prompt: _Prompt) -> list[dict]:
    if not isinstance(turn, dict) or turn.get("role") not in ("user", "assistant"):
        raise invalid(f"{where} must be an object whose role is 'user', 'assistant' or 'system'", f"{where}.role")
    role, content = turn["role"], turn.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise invalid(f"{where}.content must be a string or an array of blocks", f"{where}.content")
    out: list[dict] = []
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict] = []
    for j, block in enumerate(content):
        here = f"{where}.content[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(_string(block, "text", here))
        elif kind == "tool_use" and role == "assistant":
            if not isinstance(block.get("name"), str) or not block["name"]:
                raise invalid(f"{here}.name must be a non-empty string", f"{here}.name")
            if block.get("input") is not None and not isinstance(block.get("input"), dict):
                raise invalid(f"{here}.input must be an object", f"{here}.input")
            calls.append({"id": _string(block, "id", here), "type": "function",
                          "function": {"name": block["name"], "arguments": json.dumps(block.get("input") or {})}})
        elif kind == "tool_result" and role == "user":
            out.append({"role": "tool", "tool_call_id": _string(block, "tool_use_id", here),
                        "content": _result_text(block.get("content"), here, prompt)})
        elif kind == "thinking" and role == "assistant":
            # an earlier turn's thinking (this server writes it as a thinking block): handed to the
            # template as reasoning_content, which keeps or drops it as OpenAI chat's is (issue 38)
            thoughts.append(_string(block, "thinking", here))
        elif kind in ("thinking", "redacted_thinking"):
            continue  # encrypted (another model's), or not the assistant's: not for this one's template
        else:
            raise invalid(f"{here}: '{kind}' blocks are not supported here (text, and tool_use from the assistant "
                          "or tool_result from the user, are)", here)
    if role == "assistant":
        message = {"role": "assistant", "content": "\n".join(texts)}
        if any(thoughts):
            message["reasoning_content"] = "\n".join(t for t in thoughts if t)
        if calls:
            message["tool_calls"] = calls
        return [message]
    if texts or not out:  # blocks joined by a newline, as llama.cpp joins text parts
        out.append({"role": "user", "content": "\n".join(texts)})
    return out


def _string(block: dict, name: str, where: str) -> str:
    """A block's string field ("" when absent or null); another type is a 400 naming it."""
    value = block.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise invalid(f"{where}.{name} must be a string", f"{where}.{name}")
    return value


def _result_text(content: object, where: str, prompt: _Prompt) -> str:
    """A tool result's text; its tool_reference blocks (a tool search's matches) load those tools."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for block in content if isinstance(content, list) else [None]:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(_string(block, "text", where))
        elif kind == "tool_reference" and isinstance(block.get("tool_name"), str):
            prompt.changes.append(("load", block["tool_name"]))
        else:
            raise invalid(f"{where}.content must be a string or text blocks (images are not supported)",
                          f"{where}.content")
    return "\n".join(texts)


def _tool(tool: object, where: str) -> dict | None:
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        raise invalid(f"{where} must be {{\"name\": ..., \"input_schema\": {{...}}}}", where)
    if tool.get("type") not in (None, "custom"):  # a server tool (web search, code execution ...)
        note(ROUTE, f"tool type '{tool['type']}' left out", "Anthropic's servers run it; this server cannot",
             always=True)
        return None
    schema = tool.get("input_schema")
    if schema is not None and not isinstance(schema, dict):
        raise invalid(f"{where}.input_schema must be a JSON schema object", f"{where}.input_schema")
    description = tool.get("description")
    if description is not None and not isinstance(description, str):
        raise invalid(f"{where}.description must be a string", f"{where}.description")
    return {"type": "function", "function": {"name": tool["name"], "description": description or "",
                                             "parameters": schema or {"type": "object"}}}


def _tool_choice(choice: object) -> tuple[object, bool]:
    if not isinstance(choice, dict) or choice.get("type") not in ("auto", "any", "tool", "none"):
        raise invalid("'tool_choice' must be {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"}", "tool_choice")
    parallel = not choice.get("disable_parallel_tool_use", False)
    kind = choice["type"]
    if kind == "tool":
        if not isinstance(choice.get("name"), str):
            raise invalid("'tool_choice' of type 'tool' needs the tool's 'name'", "tool_choice")
        return {"type": "function", "function": {"name": choice["name"]}}, parallel
    return {"auto": "auto", "any": "required", "none": "none"}[kind], parallel


def messages_handler(state: ServerState):
    """Anthropic's Messages API: the request as a chat request, the answer in Anthropic's shapes
    (errors too: {"type": "error", "error": {...}})."""
    async def handle(request: Request) -> Response:
        try:
            refuse_if_draining(state)
            job, stops = await prepare_request(state, request, lambda body, stop: _parse_messages(state, body, stop))
            return await answer(state, request, job, AnthropicWriter(job, state.served.name, stops))
        except Exception as e:
            return _error(request, e)

    return handle


def _error(request: Request, e: Exception) -> Response:
    """An Anthropic route's error in Anthropic's shape, a bug's 500 included (issue 41: they came
    in OpenAI's); a client that left or a server stopping are answered as on every route."""
    if isinstance(e, (ClientGone, ServerStopping)):
        raise e
    if not isinstance(e, APIError):
        traceback.print_exception(e, file=sys.stderr)
        e = APIError(500, f"internal server error ({type(e).__name__})")
    e = renamed(e, ANTHROPIC_NAMES)
    retry = {"Retry-After": str(e.retry_after)} if e.retry_after is not None else None
    return JSONResponse(error_body(e), status_code=e.status, headers=retry)


def _parse_messages(state: ServerState, body: object, stop: Callable[[], bool]) -> tuple[Job, tuple[str, ...]]:
    chat = chat_request(body)
    job = checked(state, lambda: parse_chat(chat, state.served, SessionTemplate(state.runtime, stop)), "messages")
    stops = chat.get("stop") or ()
    return job, tuple(stops) if isinstance(stops, list) else (stops,)


def count_tokens_handler(state: ServerState):
    """POST /v1/messages/count_tokens: the prompt's tokens, as Claude Code asks before sending."""
    async def handle(request: Request) -> Response:
        try:
            count = await prepare_request(state, request, lambda body, stop: chat_prompt_tokens(
                chat_request(body), state.served, SessionTemplate(state.runtime, stop, bounded=False)))
            return JSONResponse({"input_tokens": count})
        except Exception as e:
            return _error(request, e)

    return handle
