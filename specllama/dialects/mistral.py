"""Mistral: `[TOOL_CALLS]NAME[ARGS]{...}` (v11 and later; `[CALL_ID]id` may stand before `[ARGS]`),
or `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]` (v3). Calls run to the answer's end;
thinking is `[THINK]...[/THINK]`."""

from __future__ import annotations

import re

from specllama.dialects.dialect import Dialect, ToolSet, call, json_call, json_prefix

OPEN = "[TOOL_CALLS]"
NAMED = re.compile(r"\s*([^\[\]\s{]+)\s*(?:\[CALL_ID\]\s*[^\[\s]*\s*)?\[ARGS\]", re.S)


def _one(text: str) -> tuple[list, str] | None:
    """The calls one [TOOL_CALLS] begins, and the text after them; None if it begins none."""
    named = NAMED.match(text)
    found = json_prefix(text[named.end():] if named else text)
    if found is None:
        return None
    value, rest = found
    if named:
        one = call(named.group(1), value)
        return None if one is None else ([one], rest)
    calls = [json_call(item) for item in (value if isinstance(value, list) else [value])]
    return None if not calls or any(c is None for c in calls) else (calls, rest)


def decode(open_: str, body: str, tools: ToolSet, complete: bool):
    """Calls one after another, each JSON read whole before the next [TOOL_CALLS] is looked for
    (an argument may hold that text). Cut short, the calls read whole before the cut are kept."""
    calls, rest = [], body
    while True:
        found = _one(rest)
        if found is None:
            return None if complete else calls
        more, rest = found
        rest = rest.lstrip()
        if not rest:
            return calls + more if complete else calls  # the last one may have been cut where it ends
        if not rest.startswith(OPEN):
            return None if complete else calls
        calls += more
        rest = rest[len(OPEN):]


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
