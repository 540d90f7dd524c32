"""Hermes / Qwen2.5 / Qwen3: `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`, after
an optional `<think>...</think>`. A small model's bare or fenced JSON answer naming an offered
function is a call too (tool_calls.bare_calls: Qwen2.5-Coder 1.5B writes its calls that way)."""

from __future__ import annotations

import json

from specllama.dialects.calls import CLOSE, OPEN, bare_calls
from specllama.dialects.dialect import Dialect, ToolSet, json_call, json_prefix


def decode(open_: str, body: str, tools: ToolSet, complete: bool):
    if not complete:
        return []
    found = json_prefix(body)
    if found is None or found[1].strip():
        return None
    one = json_call(found[0])
    return None if one is None else [one]


def forced(name: str | None) -> str:
    if name is None:
        return OPEN + "\n"
    return OPEN + "\n" + '{"name": ' + json.dumps(name, ensure_ascii=False) + ', "arguments": '


HERMES = Dialect(
    name="hermes",
    detect=lambda t: OPEN in t and "<function=" not in t and "<arg_key>" not in t,
    regions=((OPEN, CLOSE),),
    decode=decode,
    think=("<think>", "</think>"),
    bare=lambda text, tools: bare_calls(text, tools.names) or None,
    bare_starts=("{", "[", "```"),
    markers=(OPEN, CLOSE, "<think>", "</think>"),
    forced=forced,
    stops=(CLOSE,),
)
