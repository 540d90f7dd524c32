"""The model's text -> OpenAI tool calls, for chat templates of the Hermes kind (Qwen2.5, Qwen3,
Hermes): a call is `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`.

One parser serves the streamed and the whole answer (the whole text is fed in one piece), so both
give the same content and calls for any split of the text into pieces. A call is handed on only
once it is complete and its JSON parses: a streamed client gets each call whole (its id and name
in one delta, its arguments in the next), never a half call it would have to take back. A call
whose JSON does not parse is given back as plain text content, never a 500: without a grammar a
model may write anything. Whitespace around calls is dropped (the template's newlines), the
text's own whitespace kept.

Small models do not always use the tags: Qwen2.5-Coder 1.5B, offered tools under `tool_choice:
"auto"`, answers with the call as a fenced JSON block (```json {"name": ..., "arguments": ...} ```).
An answer that *starts* with `{` or a code fence is therefore held back to its end, and is a call
(or several: a JSON list) when its JSON is one whose names are all offered tools; otherwise it is
the content it was. Streamed clients then get such an answer at its end, as a whole client does.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field

OPEN, CLOSE = "<tool_call>", "</tool_call>"
FENCED = re.compile(r"^```[A-Za-z]*\s*(.*?)\s*```$", re.S)


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # a JSON object's text, as OpenAI sends it

    def openai(self) -> dict:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


def parse_call(body: str) -> ToolCall | None:
    """One call's JSON ({"name": ..., "arguments": {...}}; "parameters" is accepted for
    "arguments", as some models write it); None when it is not one."""
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return None
    arguments = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(arguments, str):  # some models write the arguments as a JSON string, as OpenAI sends them
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return ToolCall(new_call_id(), obj["name"], json.dumps(arguments, ensure_ascii=False))


@dataclass
class ToolCallParser:
    """feed(text) -> parts, then end() -> parts; a part is a str (content) or a ToolCall.
    `forced` is text the answer began with in the prompt (a forced call's opening), parsed first."""

    forced: str = ""
    names: frozenset[str] = frozenset()  # offered functions: a bare JSON call naming them counts
    pending: str = ""
    bare: bool | None = None  # the answer began like a bare JSON call (held to the end); None: not known yet
    inside: bool = False  # between an opening and its closing
    after_call: bool = False  # whitespace that follows a call is dropped
    calls: int = 0
    _parts: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self._forced_parts = self.feed(self.forced) if self.forced else []

    def first(self) -> list:
        """What the forced opening alone gives (nothing, unless it held a whole call)."""
        parts, self._forced_parts = self._forced_parts, []
        return parts

    def feed(self, text: str) -> list:
        self.pending += text
        if self.names and self.bare is None and not self.calls:
            lead = self.pending.lstrip()
            if not lead or (len(lead) < 3 and "```".startswith(lead)):
                return []  # not known yet
            self.bare = lead.startswith(("{", "[", "```"))
        if self.bare:
            return []  # decided at the end
        out: list = []
        while True:
            if self.inside:
                end = self.pending.find(CLOSE)
                if end < 0:
                    return out
                body, self.pending = self.pending[:end], self.pending[end + len(CLOSE):]
                self.inside = False
                out += self._call(body, closed=True)
                continue
            if self.after_call:
                self.pending = self.pending.lstrip()
                if not self.pending:
                    return out
                self.after_call = False
            start = self.pending.find(OPEN)
            if start < 0:
                break
            before, self.pending = self.pending[:start], self.pending[start + len(OPEN):]
            if before.rstrip():
                out.append(before.rstrip())
            self.inside = True
        # no opening in sight: hand on all but what may be the start of one, and trailing whitespace
        hold = _partial_open(self.pending)
        head = self.pending[:len(self.pending) - hold]
        safe = head.rstrip()
        if safe:
            out.append(safe)
            self.pending = self.pending[len(safe):]
        return out

    def end(self, cut: bool = False) -> list:
        """The text is complete: an unclosed call is a call if its JSON is whole (a stop string
        or the model's end may cut the closing), and held-back text is content. `cut`: max_tokens
        ended the answer, so an unclosed call is a half call: neither a call nor content."""
        out: list = []
        if self.bare:
            calls = bare_calls(self.pending, self.names)
            if calls:
                self.calls += len(calls)
                self.pending = ""
                return calls
            self.bare = False
            out += self.feed("")  # the tags' way after all
        if self.inside:
            out += [] if cut else self._call(self.pending, closed=False)
        elif self.pending:
            text = self.pending.rstrip() if self.calls else self.pending
            if text:
                out.append(text)
        self.pending = ""
        self.inside = False
        return out

    def _call(self, body: str, closed: bool) -> list:
        call = parse_call(body.strip())
        if call is None:  # not a call after all: the model's text, as it wrote it
            return [OPEN + body + (CLOSE if closed else "")]
        self.calls += 1
        self.after_call = True
        return [call]


def bare_calls(text: str, names: frozenset[str]) -> list[ToolCall]:
    """The calls a whole answer holds as bare or fenced JSON (one object, or a list of them), when
    every one names an offered function; [] otherwise."""
    body = text.strip()
    fenced = FENCED.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        obj = json.loads(body)
    except ValueError:
        return []
    items = obj if isinstance(obj, list) else [obj]
    calls = [parse_call(json.dumps(item)) if isinstance(item, dict) else None for item in items]
    if not calls or any(c is None or c.name not in names for c in calls):
        return []
    return calls


def _partial_open(text: str) -> int:
    """How many characters at the end of `text` could begin an opening tag."""
    for n in range(min(len(OPEN) - 1, len(text)), 0, -1):
        if OPEN.startswith(text[-n:]):
            return n
    return 0


def split_calls(text: str, forced: str = "", names: frozenset[str] = frozenset(),
                cut: bool = False) -> tuple[str | None, list[ToolCall]]:
    """A whole answer: (its content, None when empty; its calls); `cut` as in ToolCallParser.end."""
    parser = ToolCallParser(forced, names=names)
    parts = parser.first() + parser.feed(text) + parser.end(cut)
    content = "".join(p for p in parts if isinstance(p, str))
    return (content or None), [p for p in parts if isinstance(p, ToolCall)]
