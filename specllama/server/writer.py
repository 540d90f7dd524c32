"""How an answer is written, whole or as a stream, for each API the server speaks: the Writer
interface exchange.py drives, and what every API's writer (api/) shares: the server-sent event
line, an answer's parts.

A writer sees the engine's events for its request; exchange.py only routes them. Thinking and tool calls
are parsed by one parser of the model's dialect per answer (dialects/), fed the same text whether
it arrives in pieces or whole, so a streamed answer assembles to the whole one.
"""

from __future__ import annotations

import json
from typing import Protocol

from specllama.decoding.events import DoneEvent, Summary, TokenEvent
from specllama.dialects import ToolSet
from specllama.dialects.answer import AnswerParser, split_answer
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
