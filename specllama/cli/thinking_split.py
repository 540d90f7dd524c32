"""`specllama run`'s answer split into its thinking and the rest, by the template's dialect
(dialects/): the thinking goes to stderr with --show-thinking (else nowhere), the rest to
stdout, and the tokens written while thinking are counted for --stats."""

from __future__ import annotations

import sys

from specllama.dialects import Reasoning, ToolSet
from specllama.dialects.answer import AnswerParser


class ThinkingSplit:
    def __init__(self, parser: AnswerParser | None, show: bool):
        self.parser = parser
        self.show = show
        self.thinking = ""
        self.thinking_tokens = 0
        self._shown_any = False

    @classmethod
    def of(cls, session, prompt: str, system: str | None, show: bool) -> ThinkingSplit:
        """For the session's model: a parser only where its template thinks (else text passes as it is)."""
        dialect, thinks = session.chat_dialect()
        if dialect is None or not thinks:
            return cls(None, show)
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        opened = dialect.starts_thinking(session.render_chat(messages))
        return cls(AnswerParser(dialect, ToolSet(), thinking=opened, parses_tools=False), show)

    def feed(self, text: str, token: bool, last: str | bool = False) -> str:
        """The answer's text of this event (thinking taken out); `token`: the event is one token
        (counted as thinking when the parser was inside the thinking as it came); `last`: the
        finish reason of the answer's last event."""
        if self.parser is None:
            return text
        if token and self.parser.in_thinking:
            self.thinking_tokens += 1
        parts = self.parser.feed(text) if text else []
        if last:
            parts += self.parser.end(cut=last in ("length", "context"))
        out = []
        for part in parts:
            if isinstance(part, Reasoning):
                self.thinking += part.text
                if self.show:
                    sys.stderr.write(("" if self._shown_any else "thinking: ") + part.text)
                    sys.stderr.flush()
                    self._shown_any = True
            elif isinstance(part, str):
                out.append(part)
        if last and self._shown_any:
            sys.stderr.write("\n")
        return "".join(out)
