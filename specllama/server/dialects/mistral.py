"""Mistral: `[TOOL_CALLS]NAME[ARGS]{...}` (v11 and later; `[CALL_ID]id` may stand before `[ARGS]`),
or `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]` (v3). Calls run to the answer's end;
thinking is `[THINK]...[/THINK]`."""

from __future__ import annotations

import re

from specllama.server.dialects.dialect import Dialect, ToolSet, call, json_call, json_prefix

OPEN = "[TOOL_CALLS]"
NAMED = re.compile(r"\s*([^\[\]\s{]+)\s*(?:\[CALL_ID\]\s*[^\[\s]*\s*)?\[ARGS\]", re.S)


def _segment(text: str) -> list | None:
    named = NAMED.match(text)
    found = json_prefix(text[named.end():] if named else text)
    if found is None or found[1].strip():
        return None
    if named:
        one = call(named.group(1), found[0])
        return None if one is None else [one]
    items = found[0] if isinstance(found[0], list) else [found[0]]
    calls = [json_call(item) for item in items]
    return None if not calls or any(c is None for c in calls) else calls


def decode(open_: str, body: str, tools: ToolSet, complete: bool):
    segments = body.split(OPEN)
    if not complete:
        segments = segments[:-1]  # the last one was cut: only those before it are whole
    calls = []
    for segment in segments:
        found = _segment(segment)
        if found is None:
            return None if complete else calls
        calls += found
    return calls


def forced(name: str | None) -> str:
    return OPEN if name is None else OPEN + name + "[ARGS]"


MISTRAL = Dialect(
    name="mistral",
    detect=lambda t: OPEN in t,
    regions=((OPEN, None),),
    decode=decode,
    think=("[THINK]", "[/THINK]"),
    markers=(OPEN, "[ARGS]", "[CALL_ID]", "[THINK]", "[/THINK]"),
    forced=forced,
)
