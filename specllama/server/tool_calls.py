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
from dataclasses import dataclass

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


def ToolCallParser(forced: str = "", names: frozenset[str] = frozenset()):  # noqa: N802 - was a class
    """The Hermes dialect's answer parser (dialects/hermes.py): feed(text) -> parts, then end() ->
    parts; a part is content (str), thinking (Reasoning) or a ToolCall. `forced` is text the answer
    began with in the prompt (a forced call's opening), parsed first; `names`: the offered functions
    (a bare JSON call naming them counts)."""
    from specllama.server.dialects.answer import AnswerParser
    from specllama.server.dialects.dialect import ToolSet
    from specllama.server.dialects.hermes import HERMES

    return AnswerParser(HERMES, ToolSet({name: {} for name in names}), forced)


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


def split_calls(text: str, forced: str = "", names: frozenset[str] = frozenset(),
                cut: bool = False) -> tuple[str | None, list[ToolCall]]:
    """A whole answer: (its content, None when empty; its calls). `cut`: max_tokens ended the
    answer, so an unfinished call is a half call: neither a call nor content."""
    from specllama.server.dialects.answer import split_answer

    content, _, calls = split_answer(ToolCallParser(forced, names=names), text, cut)
    return content, calls
