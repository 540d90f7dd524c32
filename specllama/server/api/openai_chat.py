"""POST /v1/chat/completions and /v1/completions (OpenAI's chat and completion APIs): the request
checked by schema.py's parse_chat / parse_completion, the answer written in OpenAI's shapes
(chat.completion, text_completion, their stream chunks) from the engine's Summary, plus the
speculation numbers each answer carries.

`timings` uses llama-server's names (prompt_n, predicted_per_second, draft_n, draft_n_accepted, ...)
so tools written for it, `specllama batch --server` among them, read ours; `speculation` adds what
only specllama knows: the drafter, and drafts and acceptances per source (suffix, model).
`usage.prompt_tokens_details.cached_tokens` is OpenAI's own field for prompt tokens not processed
again: here, the tokens found in the slot's cache.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

from starlette.requests import Request
from starlette.responses import Response

from specllama.decoding.events import DoneEvent, Summary, TokenEvent
from specllama.dialects import Reasoning
from specllama.server.api_errors import APIError
from specllama.server.exchange import ServerState, SessionTemplate, answer, checked, prepare_request, refuse_if_draining
from specllama.server.schema import Job, parse_chat, parse_completion
from specllama.server.tool_calls import ToolCall
from specllama.server.writer import AnswerParts, cut_short, sse

FINISH_REASONS = {"stop": "stop", "stop_string": "stop", "length": "length", "context": "length"}


@dataclass
class Answer:
    """What one response is built around; `chat` picks the shapes."""

    model: str
    chat: bool
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created: int = field(default_factory=lambda: int(time.time()))

    @property
    def response_id(self) -> str:
        return ("chatcmpl-" if self.chat else "cmpl-") + self.id

    def _envelope(self, chunk: bool) -> dict:
        kind = "chat.completion" if self.chat else "text_completion"
        if chunk and self.chat:
            kind += ".chunk"
        return {"id": self.response_id, "object": kind, "created": self.created, "model": self.model}

    def _choice(self, text: str | None, finish_reason: str | None, chunk: bool, first: bool = False) -> dict:
        if not self.chat:
            return {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish_reason}
        if chunk:
            delta = {"role": "assistant", "content": text or ""} if first else ({"content": text} if text else {})
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                "finish_reason": finish_reason}

    def whole(self, summary: Summary) -> dict:
        """The non-streamed answer."""
        return {**self._envelope(chunk=False),
                "choices": [self._choice(summary.text, finish_reason(summary), chunk=False)],
                "usage": usage(summary), "timings": timings(summary), "speculation": speculation(summary)}

    def first_chunk(self) -> dict:
        """A chat stream opens with the assistant's role (as OpenAI's does); completions need none."""
        return {**self._envelope(chunk=True), "choices": [self._choice("", None, chunk=True, first=True)]}

    def text_chunk(self, text: str) -> dict:
        return {**self._envelope(chunk=True), "choices": [self._choice(text, None, chunk=True)]}

    def last_chunk(self, summary: Summary) -> dict:
        """The finish reason, with the speculation numbers (llama-server puts `timings` here too)."""
        return {**self._envelope(chunk=True), "choices": [self._choice("", finish_reason(summary), chunk=True)],
                "timings": timings(summary), "speculation": speculation(summary)}

    def usage_chunk(self, summary: Summary) -> dict:
        """stream_options.include_usage: a last chunk with no choices and the usage."""
        return {**self._envelope(chunk=True), "choices": [], "usage": usage(summary)}


def finish_reason(summary: Summary) -> str:
    return FINISH_REASONS.get(summary.finish_reason, summary.finish_reason)


def usage(summary: Summary) -> dict:
    return {"prompt_tokens": summary.prompt_tokens, "completion_tokens": summary.tokens,
            "total_tokens": summary.prompt_tokens + summary.tokens,
            "prompt_tokens_details": {"cached_tokens": summary.reused_tokens}}


def timings(summary: Summary) -> dict:
    prefilled = summary.prompt_tokens - summary.reused_tokens
    return {
        "cache_n": summary.reused_tokens,
        "prompt_n": prefilled,
        "prompt_ms": round(summary.t_prompt * 1000, 3),
        "prompt_per_second": round(prefilled / summary.t_prompt, 3) if summary.t_prompt > 0 else 0.0,
        "predicted_n": summary.tokens,
        "predicted_ms": round(summary.t_generate * 1000, 3),
        "predicted_per_second": round(summary.tokens_per_s, 3),
        "draft_n": summary.drafted,
        "draft_n_accepted": summary.accepted,
    }


def speculation(summary: Summary) -> dict:
    return {"drafter": summary.drafter, "steps": summary.steps, "drafted": summary.drafted,
            "accepted": summary.accepted, "acceptance": summary.acceptance,
            "mean_accepted": round(summary.mean_accepted, 3),
            "drafted_by": dict(summary.drafted_by), "accepted_by": dict(summary.accepted_by)}


def capped_usage(summary: Summary, job: Job) -> dict:
    """OpenAI's usage, saying when --max-tokens capped what the client asked for."""
    out = usage(summary)
    if job.requested_max_tokens is not None:
        out["max_tokens_capped"] = {"requested": job.requested_max_tokens, "allowed": job.config.max_tokens}
    return out


class OpenAIWriter:
    def __init__(self, answer: Answer, job: Job, token_text: Callable[[int], str]):
        self.answer = answer
        self.job = job
        self.token_text = token_text
        self.parts = AnswerParts(job)
        self.calls = 0
        self.waiting_logprobs: list = []  # logprobs of tokens whose text has not been sent yet

    # --- whole ------------------------------------------------------------------------------
    def whole(self, summary: Summary, tokens: list[TokenEvent]) -> dict:
        out = self.answer.whole(summary)
        out["usage"] = capped_usage(summary, self.job)
        choice = out["choices"][0]
        if self.job.top_logprobs is not None:
            choice["logprobs"] = self._logprobs([e for e in tokens if e.logprobs is not None])
        if self.parts.parses:
            content, calls = self.parts.whole(summary)
            choice["message"]["content"] = content
            if self.parts.reasoning is not None:
                choice["message"]["reasoning_content"] = self.parts.reasoning
            if calls:
                choice["message"]["tool_calls"] = [call.openai() for call in calls]
                if not cut_short(summary):
                    choice["finish_reason"] = "tool_calls"
        return out

    # --- stream -----------------------------------------------------------------------------
    def opening(self) -> list[str]:
        out = [sse(self.answer.first_chunk())] if self.answer.chat else []
        return out + self._parts(self.parts.first())

    def keep_alive(self) -> list[str]:
        """A chunk with nothing in it (an empty delta, as OpenAI's own last chunk has): clients that end a
        stream after so long without an event (Qwen Code: 240 s) count it, where an SSE comment is none
        to them, and a cold agent prompt can take longer than that to prefill on a CPU."""
        return [sse(self.answer.text_chunk(""))]

    def token(self, event: TokenEvent) -> list[str]:
        if event.logprobs is not None:
            self.waiting_logprobs.append(event)
        return self._parts(self.parts.feed(event.text))

    def done(self, event: DoneEvent) -> list[str]:
        summary = event.summary
        out = self._parts(self.parts.end(event.text, summary))
        if summary.finish_reason == "cancelled":
            return out + [sse(APIError(503, "the server is shutting down: the answer is incomplete").body()),
                          "data: [DONE]\n\n"]
        last = self.answer.last_chunk(summary)
        if self.calls and self.answer.chat and not cut_short(summary):
            last["choices"][0]["finish_reason"] = "tool_calls"
        if self.waiting_logprobs:
            last["choices"][0]["logprobs"] = self._logprobs(self._take_logprobs())
        out.append(sse(last))
        if self.job.include_usage:
            chunk = self.answer.usage_chunk(summary)
            chunk["usage"] = capped_usage(summary, self.job)
            out.append(sse(chunk))
        return out + ["data: [DONE]\n\n"]

    def failed(self, error: APIError) -> list[str]:
        return [sse(error.body()), "data: [DONE]\n\n"]

    def _text(self, text: str) -> str:
        chunk = self.answer.text_chunk(text)
        if self.waiting_logprobs:
            chunk["choices"][0]["logprobs"] = self._logprobs(self._take_logprobs())
        return sse(chunk)

    def _parts(self, parts: list) -> list[str]:
        out = []
        for part in parts:
            if isinstance(part, str):
                out.append(self._text(part))
            elif isinstance(part, Reasoning):
                chunk = self.answer.text_chunk("")
                chunk["choices"][0]["delta"] = {"reasoning_content": part.text}
                out.append(sse(chunk))
            else:
                out += [sse(self._call_chunk(part, first=True)), sse(self._call_chunk(part, first=False))]
                self.calls += 1
        return out

    def _call_chunk(self, call: ToolCall, first: bool) -> dict:
        """A call as the openai package assembles it: index, id, type and name with empty arguments
        first, then the arguments (strings are concatenated per index, so the id is sent once)."""
        delta = {"index": self.calls, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}} \
            if first else {"index": self.calls, "function": {"arguments": call.arguments}}
        chunk = self.answer.text_chunk("")
        chunk["choices"][0]["delta"] = {"tool_calls": [delta]}
        return chunk

    def _take_logprobs(self) -> list[TokenEvent]:
        events, self.waiting_logprobs = self.waiting_logprobs, []
        return events

    # --- logprobs -----------------------------------------------------------------------------
    def _logprobs(self, events: list[TokenEvent]) -> dict:
        if self.answer.chat:
            return {"content": [self._entry(e.id, e.logprobs.logprob, e.logprobs.top) for e in events], "refusal": None}
        tokens = [self.token_text(e.id) for e in events]
        return {"tokens": tokens, "token_logprobs": [e.logprobs.logprob for e in events],
                "top_logprobs": [{self.token_text(t): lp for t, lp in e.logprobs.top} for e in events],
                "text_offset": [sum(len(t) for t in tokens[:i]) for i in range(len(tokens))]}

    def _entry(self, token: int, logprob: float, top: tuple = ()) -> dict:
        text = self.token_text(token)
        out = {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8", "surrogatepass"))}
        if top is not None:
            out["top_logprobs"] = [self._entry(t, lp, None) for t, lp in top]
        return out


def handler(state: ServerState, chat: bool):
    """POST /v1/chat/completions (chat) or /v1/completions: the answer in OpenAI's shapes."""
    async def handle(request: Request) -> Response:
        refuse_if_draining(state)
        job = await prepare_request(state, request, lambda body, stop: _parse(state, body, chat, stop))
        writer = OpenAIWriter(Answer(state.served.name, chat=chat), job, lambda t: state.runtime.detokenize([t]))
        return await answer(state, request, job, writer)

    return handle


def _parse(state: ServerState, body: object, chat: bool, stop: Callable[[], bool]) -> Job:
    """The request as the engine will run it; every reason it cannot run is a 400 now, not later."""
    runtime, served = state.runtime, state.served
    if chat:
        return checked(state, lambda: parse_chat(body, served, SessionTemplate(runtime, stop)), "messages")
    return checked(state, lambda: parse_completion(body, served, lambda text: runtime.tokenize(text, stop=stop)), "prompt")
