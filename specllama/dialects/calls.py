"""What every dialect's parser hands on: a tool call (OpenAI's shape), its id, Hermes's markers,
and reading a call from its JSON (also a bare or fenced JSON answer, which small models write
instead of the tags). Its own module below the dialects and server/tool_calls.py, which both use it."""

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
