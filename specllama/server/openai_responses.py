"""POST /v1/responses (OpenAI's Responses API, what Codex-style clients speak), for text and
function calls, whole or streamed: the request turned into the chat request parse_chat checks, the
answer written back as a Response object or its stream of typed events.

The server keeps no state between requests, so `previous_response_id` (and `store`d responses)
are refused: a client sends the whole conversation as `input` items (messages, function_call,
function_call_output), as Codex does. `text.format` other than plain text is refused here.
"""

from __future__ import annotations

import time
import uuid

from specllama.decoding.events import DoneEvent, Summary, TokenEvent
from specllama.server.api_errors import APIError, invalid
from specllama.server.dialects import Reasoning
from specllama.server.schema import Job
from specllama.server.tool_calls import ToolCall
from specllama.server.writer import AnswerParts, sse

ROLES = ("user", "system", "developer", "assistant")


def chat_request(body: object) -> dict:
    if not isinstance(body, dict):
        raise invalid("the request body must be a JSON object")
    if body.get("previous_response_id"):
        raise invalid("previous_response_id is not supported: this server keeps no responses; send the whole "
                      "conversation as 'input'", "previous_response_id")
    text_format = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    if isinstance(text_format, dict) and text_format.get("type") not in (None, "text"):
        raise invalid("text.format other than plain text is not supported on /v1/responses", "text.format")
    messages = []
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        messages.append({"role": "system", "content": body["instructions"]})
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise invalid("'input' must be a string or a non-empty array of items", "input")
    for i, item in enumerate(items):
        _item(item, messages, f"input[{i}]")
    out = {"model": body.get("model"), "messages": messages, "stream": body.get("stream", False)}
    for name in ("temperature", "top_p", "drafter", "k"):
        if body.get(name) is not None:
            out[name] = body[name]
    if body.get("max_output_tokens") is not None:
        out["max_tokens"] = body["max_output_tokens"]
    tools = [_tool(t, f"tools[{i}]") for i, t in enumerate(body.get("tools") or [])]
    if tools:
        out["tools"] = tools
        out["tool_choice"] = _tool_choice(body.get("tool_choice"))
        if body.get("parallel_tool_calls") is not None:
            out["parallel_tool_calls"] = body["parallel_tool_calls"]
    return out


def _item(item: object, messages: list[dict], where: str) -> None:
    if not isinstance(item, dict):
        raise invalid(f"{where} must be an object", where)
    kind = item.get("type", "message")
    if kind == "message":
        if item.get("role") not in ROLES:
            raise invalid(f"{where}.role must be one of {', '.join(ROLES)}", f"{where}.role")
        messages.append({"role": item["role"], "content": _text(item.get("content"), f"{where}.content")})
    elif kind == "function_call":
        call = {"id": item.get("call_id") or "", "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments") or "{}"}}
        if messages and messages[-1]["role"] == "assistant":
            messages[-1].setdefault("tool_calls", []).append(call)
        else:
            messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
    elif kind == "function_call_output":
        output = item.get("output")
        messages.append({"role": "tool", "tool_call_id": item.get("call_id") or "",
                         "content": output if isinstance(output, str) else _text(output, f"{where}.output")})
    elif kind != "reasoning":  # another model's reasoning summary: not for this one's template
        raise invalid(f"{where}: '{kind}' items are not supported (message, function_call and "
                      "function_call_output are)", where)


def _text(content: object, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") in ("input_text", "output_text", "text")
                                         for p in content):
        return "".join(p.get("text") or "" for p in content)
    raise invalid(f"{where} must be a string or text parts (input_text, output_text)", where)


def _tool(tool: object, where: str) -> dict:
    if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("name"), str):
        raise invalid(f"{where} must be {{\"type\": \"function\", \"name\": ..., \"parameters\": {{...}}}} "
                      "(only function tools are supported)", where)
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

    def __init__(self, job: Job, model: str):
        self.job = job
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
        text, calls = self.parts.whole(summary.text, cut=summary.finish_reason in ("length", "context"))
        output = [_reasoning(self.parts.reasoning)] if self.parts.reasoning else []
        output += [_message(text, "completed")] if text else []
        output += [_function_call(call, "completed") for call in calls]
        return self._response("completed", output, summary)

    def _event(self, kind: str, **fields) -> str:
        self.sequence += 1
        return sse({"type": kind, "sequence_number": self.sequence, **fields}, kind)

    def opening(self) -> list[str]:
        response = self._response("in_progress", [], None)
        out = [self._event("response.created", response=response), self._event("response.in_progress", response=response)]
        return out + self._parts(self.parts.first())

    def token(self, event: TokenEvent) -> list[str]:
        return self._parts(self.parts.feed(event.text))

    def done(self, event: DoneEvent) -> list[str]:
        cut = event.summary.finish_reason in ("length", "context")
        out = self._parts(self.parts.end(event.text, cut=cut)) + self._close_reasoning() + self._close_message()
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
                item = _function_call(part, "in_progress")
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


def _function_call(call: ToolCall, status: str) -> dict:
    return {"type": "function_call", "id": "fc_" + call.id.removeprefix("call_"), "call_id": call.id, "name": call.name,
            "arguments": call.arguments, "status": status}
