"""How an answer is written, whole or as a stream, for each API the server speaks: the Writer
interface app.py drives, and the OpenAI one (chat.completion, text_completion and their chunks).

A writer sees the engine's events for its request; app.py only routes them. Thinking and tool calls
are parsed by one parser of the model's dialect per answer (dialects/), fed the same text whether
it arrives in pieces or whole, so a streamed answer assembles to the whole one.
"""

from __future__ import annotations

import json
from typing import Callable, Protocol

from specllama.decoding.events import DoneEvent, Summary, TokenEvent
from specllama.dialects import Reasoning, ToolSet
from specllama.dialects.answer import AnswerParser, split_answer
from specllama.server.api.openai_chat import Answer, usage
from specllama.server.api_errors import APIError
from specllama.server.schema import Job
from specllama.server.tool_calls import ToolCall


class Writer(Protocol):
    def whole(self, summary: Summary, tokens: list[TokenEvent]) -> dict: ...  # the non-streamed answer

    def opening(self) -> list[str]: ...  # server-sent events before any token

    def token(self, event: TokenEvent) -> list[str]: ...

    def done(self, event: DoneEvent) -> list[str]: ...  # the last events, the stream's end marker included

    def failed(self, error: APIError) -> list[str]: ...  # a stream that cannot finish


def sse(obj: dict, event: str | None = None) -> str:
    data = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return (f"event: {event}\n" if event else "") + f"data: {data}\n\n"


def capped_usage(summary: Summary, job: Job) -> dict:
    """OpenAI's usage, saying when --max-tokens capped what the client asked for."""
    out = usage(summary)
    if job.requested_max_tokens is not None:
        out["max_tokens_capped"] = {"requested": job.requested_max_tokens, "allowed": job.config.max_tokens}
    return out


class AnswerParts:
    """An answer's text as the parts a writer hands on: the text as it comes (str), or, where the
    request's tools are parsed or the model thinks, content (str), thinking (Reasoning) and whole
    calls (ToolCall) from one parser of the model's dialect per answer (dialects/), fed the same
    text streamed or whole. Every API's writer takes its parts from one."""

    def __init__(self, job: Job):
        self.job = job
        self.parser = None
        if job.dialect is not None and (job.parses_tools or job.reasons):
            tools = ToolSet.of(job.tools.tools if job.tools is not None else ())
            self.parser = AnswerParser(job.dialect, tools, job.forced, thinking=job.thinking,
                                       parses_tools=job.parses_tools, reasons=job.reasons)

    @property
    def parses(self) -> bool:
        return self.parser is not None

    def first(self) -> list:
        """What a forced call's opening alone gives, before any token."""
        return self.parser.first() if self.parser is not None else []

    def feed(self, text: str) -> list:
        if self.parser is None:
            return [text] if text else []
        return self.parser.feed(text)

    def end(self, text: str, summary: Summary) -> list:
        """The last text (held back until now), and whatever the parser still holds (a call that
        max_tokens cut is dropped: issue 41)."""
        if self.parser is None:
            return [text] if text else []
        return self.parser.feed(text) + self.parser.end(cut_short(summary))

    def whole(self, summary: Summary) -> tuple[str | None, list[ToolCall]]:
        """A whole answer's (content, calls); without a parser, the text itself and no call.
        Its thinking is in `self.reasoning` afterwards."""
        self.reasoning: str | None = None
        if self.parser is None:
            return summary.text, []
        content, self.reasoning, calls = split_answer(self.parser, summary.text, cut_short(summary))
        return content, calls


def cut_short(summary: Summary) -> bool:
    """Whether the token budget (max_tokens, or the context) ended the answer: its finish reason is
    then `length` / `max_tokens` even when calls were made (a last call may be half written)."""
    return summary.finish_reason in ("length", "context")


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
