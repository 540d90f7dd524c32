"""One answer's parser as the writers use it: the dialect's parser, with the answer's forced start
(text the prompt already holds, such as a forced call's opening) parsed first."""

from __future__ import annotations

from specllama.dialects.calls import ToolCall
from specllama.dialects.dialect import Dialect, ToolSet
from specllama.dialects.parts import Reasoning
from specllama.dialects.scanner import Scanner


class AnswerParser:
    def __init__(self, dialect: Dialect, tools: ToolSet, forced: str = "", thinking: bool = False,
                 parses_tools: bool = True, reasons: bool = True):
        # A new answer's parser: the dialect's own (harmony) or the shared scanner. `thinking`: the
        # prompt opened the thinking; `reasons`: the template thinks at all (a Qwen2.5 template
        # holds no <think>: one there is plain text).
        parser_class = dialect.parser_class or Scanner
        self.parser = parser_class(dialect, tools, thinking=thinking, parses_tools=parses_tools, reasons=reasons)
        self._first = self.parser.feed(forced) if forced else []

    def first(self) -> list:
        """What the forced start alone gives (nothing, unless it held a whole call)."""
        parts, self._first = self._first, []
        return parts

    def feed(self, text: str) -> list:
        return self.parser.feed(text)

    def end(self, cut: bool = False) -> list:
        return self.parser.end(cut)

    @property
    def in_thinking(self) -> bool:
        """Whether the text so far leaves the model inside its thinking."""
        return self.parser.in_thinking


def split_answer(parser: AnswerParser, text: str, cut: bool = False) -> tuple[str | None, str | None, list[ToolCall]]:
    """A whole answer: (content, reasoning; None when empty) and its calls."""
    parts = parser.first() + parser.feed(text) + parser.end(cut)
    content = "".join(p for p in parts if isinstance(p, str))
    reasoning = "".join(p.text for p in parts if isinstance(p, Reasoning))
    return content or None, reasoning or None, [p for p in parts if isinstance(p, ToolCall)]
