"""POST /v1/messages (Anthropic's Messages API, what Claude Code and the `anthropic` package speak):
the request turned into the chat request parse_chat already checks, the answer written back in
Anthropic's shapes, whole or as its stream of named events.

Request: `system` (a string or text blocks), `messages` whose content is a string or blocks (text,
tool_use, tool_result), `tools` ({name, description, input_schema}), `tool_choice` (auto, any,
tool with a name: that tool is forced, none; `disable_parallel_tool_use`), `max_tokens`,
`stop_sequences`, `temperature`, `top_p`, `top_k`, `stream`. Tools of a named built-in type
(web_search_..., bash_...) are run by Anthropic's servers, not by a model here: they are left out.
Claude Code's per-request `x-anthropic-billing-header` system line is dropped: it changes on every
request, and in the prompt it would defeat the slot's prefix cache from the first lines on.
"""

from __future__ import annotations

import json
import uuid

from specllama.decoding.events import DoneEvent, Summary, TokenEvent
from specllama.server.api_errors import APIError, invalid
from specllama.server.dialects import Reasoning
from specllama.server.schema import Job
from specllama.server.tool_calls import ToolCall
from specllama.server.writer import AnswerParts, sse

BILLING_LINE = "x-anthropic-billing-header:"
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
               413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error"}


def chat_request(body: object) -> dict:
    """The Messages request as an OpenAI chat request (for parse_chat)."""
    if not isinstance(body, dict):
        raise invalid("the request body must be a JSON object")
    messages = []
    system = _system_text(body.get("system"))
    if system:
        messages.append({"role": "system", "content": system})
    turns = body.get("messages")
    if not isinstance(turns, list) or not turns:
        raise invalid("'messages' must be a non-empty array", "messages")
    for i, turn in enumerate(turns):
        messages += _turn(turn, f"messages[{i}]")
    out = {"model": body.get("model"), "messages": messages, "stream": body.get("stream", False)}
    for name in ("temperature", "top_p", "top_k", "drafter", "k"):
        if body.get(name) is not None:
            out[name] = body[name]
    if body.get("max_tokens") is not None:
        out["max_tokens"] = body["max_tokens"]
    if body.get("stop_sequences") is not None:
        out["stop"] = body["stop_sequences"]
    tools = [_tool(tool, f"tools[{i}]") for i, tool in enumerate(body.get("tools") or [])]
    tools = [t for t in tools if t is not None]
    if tools:
        out["tools"] = tools
        choice = body.get("tool_choice") or {"type": "auto"}
        out["tool_choice"], parallel = _tool_choice(choice)
        out["parallel_tool_calls"] = parallel
    return out


def _system_text(system: object) -> str:
    if system is None:
        return ""
    if isinstance(system, str):
        texts = [system]
    elif isinstance(system, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in system):
        texts = [b.get("text") or "" for b in system]
    else:
        raise invalid("'system' must be a string or an array of text blocks", "system")
    lines = "\n".join(texts).split("\n")
    return "\n".join(line for line in lines if not line.startswith(BILLING_LINE)).strip("\n")


def _turn(turn: object, where: str) -> list[dict]:
    if not isinstance(turn, dict) or turn.get("role") not in ("user", "assistant"):
        raise invalid(f"{where} must be an object whose role is 'user' or 'assistant'", f"{where}.role")
    role, content = turn["role"], turn.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise invalid(f"{where}.content must be a string or an array of blocks", f"{where}.content")
    out: list[dict] = []
    texts: list[str] = []
    calls: list[dict] = []
    for j, block in enumerate(content):
        here = f"{where}.content[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(block.get("text") or "")
        elif kind == "tool_use" and role == "assistant":
            calls.append({"id": block.get("id") or "", "type": "function",
                          "function": {"name": block.get("name"), "arguments": json.dumps(block.get("input") or {})}})
        elif kind == "tool_result" and role == "user":
            out.append({"role": "tool", "tool_call_id": block.get("tool_use_id") or "",
                        "content": _result_text(block.get("content"), here)})
        elif kind in ("thinking", "redacted_thinking"):
            continue  # a reasoning trace of another model: not for this one's template
        else:
            raise invalid(f"{here}: '{kind}' blocks are not supported here (text, and tool_use from the assistant "
                          "or tool_result from the user, are)", here)
    if role == "assistant":
        message = {"role": "assistant", "content": "".join(texts)}
        if calls:
            message["tool_calls"] = calls
        return [message]
    if texts or not out:
        out.append({"role": "user", "content": "".join(texts)})
    return out


def _result_text(content: object, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return "".join(b.get("text") or "" for b in content)
    raise invalid(f"{where}.content must be a string or text blocks (images are not supported)", f"{where}.content")


def _tool(tool: object, where: str) -> dict | None:
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        raise invalid(f"{where} must be {{\"name\": ..., \"input_schema\": {{...}}}}", where)
    if tool.get("type") not in (None, "custom"):
        return None  # a server tool (web search, code execution ...) that only Anthropic runs
    return {"type": "function", "function": {"name": tool["name"], "description": tool.get("description") or "",
                                             "parameters": tool.get("input_schema") or {"type": "object"}}}


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


def error_body(error: APIError) -> dict:
    return {"type": "error", "error": {"type": ERROR_TYPES.get(error.status, "api_error"), "message": error.message}}


def _usage(summary: Summary) -> dict:
    return {"input_tokens": summary.prompt_tokens - summary.reused_tokens, "output_tokens": summary.tokens,
            "cache_read_input_tokens": summary.reused_tokens, "cache_creation_input_tokens": 0}


class AnthropicWriter:
    """The answer as a Message, or as message_start ... message_stop (writer.Writer)."""

    def __init__(self, job: Job, model: str, stops: tuple[str, ...]):
        self.job = job
        self.model = model
        self.stops = stops  # the client's stop_sequences, to name the one that ended the answer
        self.id = "msg_" + uuid.uuid4().hex[:24]
        self.parts = AnswerParts(job)
        self.block = -1  # the index of the open content block
        self.block_kind = ""
        self.calls = 0

    def _stop(self, summary: Summary, calls: int) -> tuple[str, str | None]:
        if calls:
            return "tool_use", None
        if summary.finish_reason in ("length", "context"):
            return "max_tokens", None
        if summary.finish_reason == "stop_string":
            return "stop_sequence", self.stops[0] if len(self.stops) == 1 else None
        return "end_turn", None

    def whole(self, summary: Summary, tokens: list[TokenEvent]) -> dict:
        text, calls = self.parts.whole(summary.text, cut=summary.finish_reason in ("length", "context"))
        content = [_thinking(self.parts.reasoning)] if self.parts.reasoning else []
        content += [{"type": "text", "text": text}] if text else []
        content += [_tool_use(call) for call in calls]
        reason, sequence = self._stop(summary, len(calls))
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": content,
                "stop_reason": reason, "stop_sequence": sequence, "usage": _usage(summary)}

    def opening(self) -> list[str]:
        start = {"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": [],
                 "stop_reason": None, "stop_sequence": None,
                 "usage": {"input_tokens": len(self.job.prompt), "output_tokens": 0}}
        out = [sse({"type": "message_start", "message": start}, "message_start"), sse({"type": "ping"}, "ping")]
        return out + self._parts(self.parts.first())

    def token(self, event: TokenEvent) -> list[str]:
        return self._parts(self.parts.feed(event.text))

    def done(self, event: DoneEvent) -> list[str]:
        summary = event.summary
        out = self._parts(self.parts.end(event.text, cut=summary.finish_reason in ("length", "context")))
        if summary.finish_reason == "cancelled":
            return out + self.failed(APIError(503, "the server is shutting down: the answer is incomplete"))
        out += self._close()
        reason, sequence = self._stop(summary, self.calls)
        out.append(sse({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": sequence},
                        "usage": _usage(summary)}, "message_delta"))
        return out + [sse({"type": "message_stop"}, "message_stop")]

    def failed(self, error: APIError) -> list[str]:
        return [sse(error_body(error), "error")]

    def _parts(self, parts: list) -> list[str]:
        out = []
        for part in parts:
            if isinstance(part, Reasoning):
                if self.block_kind != "thinking":
                    out += self._close()
                    out += self._open(_thinking(""), "thinking")
                out.append(sse({"type": "content_block_delta", "index": self.block,
                                "delta": {"type": "thinking_delta", "thinking": part.text}}, "content_block_delta"))
            elif isinstance(part, str):
                if self.block_kind != "text":
                    out += self._close()
                    out += self._open({"type": "text", "text": ""}, "text")
                out.append(sse({"type": "content_block_delta", "index": self.block,
                                "delta": {"type": "text_delta", "text": part}}, "content_block_delta"))
            else:
                out += self._close()
                block = _tool_use(part)
                out += self._open({**block, "input": {}}, "tool_use")
                out.append(sse({"type": "content_block_delta", "index": self.block,
                                "delta": {"type": "input_json_delta", "partial_json": part.arguments}},
                               "content_block_delta"))
                out += self._close()
                self.calls += 1
        return out

    def _open(self, block: dict, kind: str) -> list[str]:
        self.block += 1
        self.block_kind = kind
        return [sse({"type": "content_block_start", "index": self.block, "content_block": block}, "content_block_start")]

    def _close(self) -> list[str]:
        if not self.block_kind:
            return []
        self.block_kind = ""
        return [sse({"type": "content_block_stop", "index": self.block}, "content_block_stop")]


def _thinking(text: str) -> dict:
    """A thinking block. Its signature is empty: nothing here signs thinking (Anthropic's own check
    of it on a later turn does not apply to this server, which takes it back as it is)."""
    return {"type": "thinking", "thinking": text, "signature": ""}


def _tool_use(call: ToolCall) -> dict:
    return {"type": "tool_use", "id": "toolu_" + call.id.removeprefix("call_"), "name": call.name,
            "input": json.loads(call.arguments)}
