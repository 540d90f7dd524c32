"""Anthropic's answer shapes, for POST /v1/messages (anthropic.py parses the request): the whole
Message, or its stream of named events (message_start, content blocks of text, thinking and
tool_use with their deltas, message_delta, message_stop), and its errors' body. Its own module
because it is a writer (writer.Writer's interface), apart from the request's parsing.
"""

from __future__ import annotations

import json
import uuid

from specllama.decoding.events import DoneEvent, Summary, TokenEvent
from specllama.dialects import Reasoning
from specllama.server.api_errors import APIError
from specllama.server.schema import Job
from specllama.server.tool_calls import ToolCall
from specllama.server.writer import AnswerParts, cut_short, sse

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
               413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error"}


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
        if cut_short(summary):  # before calls: a budget that cut the answer may have cut a call
            return "max_tokens", None
        if calls:
            return "tool_use", None
        if summary.finish_reason == "stop_string":
            return "stop_sequence", summary.stop_string or (self.stops[0] if len(self.stops) == 1 else None)
        return "end_turn", None

    def whole(self, summary: Summary, tokens: list[TokenEvent]) -> dict:
        text, calls = self.parts.whole(summary)
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

    def keep_alive(self) -> list[str]:
        """What Anthropic's own streams send while they have nothing else (its SDKs skip it)."""
        return [sse({"type": "ping"}, "ping")]

    def done(self, event: DoneEvent) -> list[str]:
        summary = event.summary
        out = self._parts(self.parts.end(event.text, summary))
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
