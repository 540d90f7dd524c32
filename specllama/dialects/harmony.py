"""GPT-OSS's harmony format: the answer is a run of messages, each `[<|start|>assistant[ to=R]]
<|channel|>CHANNEL[ to=R][ <|constrain|>json]<|message|>BODY` ended by <|end|>, <|call|> or
<|return|> (the last two end the generation and are cut from the text). The analysis channel is
thinking, final (and commentary without a recipient, a preamble) is content, and a body addressed
`to=functions.NAME` is a call with that body as its JSON arguments. Other recipients (the built-in
python and browser tools) are not the client's functions: they are dropped.

Its own parser (not scanner.Scanner) since a message's meaning is in its header: text is handed
on as it comes once the header is read, holding back only what could begin a terminator."""

from __future__ import annotations

import re

from specllama.dialects.dialect import Dialect, ToolSet, call, json_prefix
from specllama.dialects.parts import Reasoning
from specllama.dialects.scanner import partial_tail

MESSAGE = "<|message|>"
ENDS = ("<|end|>", "<|call|>", "<|return|>")
RECIPIENT = re.compile(r"to=(\S+?)(?=<|\s|$)")
CHANNEL = re.compile(r"<\|channel\|>\s*(\w+)")


class HarmonyParser:
    def __init__(self, dialect: Dialect, tools: ToolSet, thinking: bool = False, parses_tools: bool = True,
                 reasons: bool = True):
        self.tools = tools
        self.parses_tools = parses_tools
        self.pending = ""
        self.header: str | None = ""  # the header being read; None once in a body
        self.kind = ""  # the body's: "reasoning", "content", "call" or "drop"
        self.recipient = ""
        self.lead = True
        self.said = False
        self.calls = 0

    def feed(self, text: str) -> list:
        self.pending += text
        out: list = []
        while True:
            if self.header is not None:
                at = self.pending.find(MESSAGE)
                if at < 0:
                    return out
                self._begin(self.header + self.pending[:at])
                self.pending = self.pending[at + len(MESSAGE):]
                continue
            found = self._terminator()
            if found is None:
                if self.kind in ("reasoning", "content"):
                    out += self._safe()
                return out
            at, end = found
            out += self._finish(self.pending[:at], complete=True)
            self.pending = self.pending[at + len(end):]
            self.header = ""

    @property
    def in_thinking(self) -> bool:
        return self.kind == "reasoning"

    def _terminator(self) -> tuple[int, str] | None:
        """The body's end: its first terminator, except in a call, whose JSON may hold one in a string:
        there the first at which the JSON is whole (or, failing that, the first)."""
        found = sorted((at, e) for e in ENDS if (at := self.pending.find(e)) >= 0)
        if self.kind != "call" or not found:
            return found[0] if found else None
        for end in ENDS:
            at = self.pending.find(end)
            while at >= 0:
                whole = json_prefix(self.pending[:at])
                if whole is not None and not whole[1].strip():
                    return at, end
                at = self.pending.find(end, at + 1)
        return None

    def end(self, cut: bool = False) -> list:
        if self.header is not None:  # a header never finished: nothing the client should see
            text = self.pending
            self.pending = ""
            return [] if "<|channel|>" in text or "<|start|>" in text or not text.strip() else [text]
        out = self._finish(self.pending, complete=not cut)
        self.pending = ""
        return out

    def _begin(self, header: str) -> None:
        channel = CHANNEL.search(header)
        recipient = RECIPIENT.search(header)
        self.recipient = recipient.group(1) if recipient else ""
        name = channel.group(1) if channel else ""
        self.header, self.lead = None, True
        if self.recipient:
            self.kind = "call" if self.recipient.startswith("functions.") and self.parses_tools else "drop"
        elif name == "analysis":
            self.kind = "reasoning"
        else:
            self.kind = "content"

    def _safe(self) -> list:
        if self.lead:
            self.pending = self.pending.lstrip()
        hold = partial_tail(self.pending, ENDS)
        head = self.pending[:len(self.pending) - hold].rstrip()
        if not head:
            return []
        self.pending = self.pending[len(head):]
        self.lead = False
        return [self._part(head, self.kind)]

    def _part(self, text: str, kind: str):
        if kind == "reasoning":
            return Reasoning(text)
        self.said = True
        return text

    def _finish(self, body: str, complete: bool) -> list:
        kind, self.kind = self.kind, ""
        if kind == "call":
            found = json_prefix(body) if complete else None
            one = call(self.recipient.removeprefix("functions."), found[0]) \
                if found is not None and not found[1].strip() else None
            if one is None:
                return []
            self.calls += 1
            return [one]
        if kind in ("reasoning", "content"):
            if self.lead:
                body = body.lstrip()
            body = body.rstrip()
            return [self._part(body, kind)] if body else []
        return []


HARMONY = Dialect(
    name="harmony",
    detect=lambda t: "<|channel|>" in t and "<|message|>" in t,
    regions=(("<|channel|>", None),),  # for the grammar trigger only: the parser is HarmonyParser
    markers=("<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|call|>", "<|return|>"),
    forced=lambda name: "<|channel|>commentary to=functions." + (f"{name} <|constrain|>json<|message|>" if name else ""),
    parser_class=HarmonyParser,
)
