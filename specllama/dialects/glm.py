"""GLM 4.5 and later: `<tool_call>NAME<arg_key>k</arg_key><arg_value>v</arg_value>...</tool_call>`
(4.5/4.6 put newlines between the parts, 4.7 and 5.x none). String values are written raw; other
values are JSON, so the tool's schema says which is which (values.py)."""

from __future__ import annotations

import re

from specllama.dialects.dialect import Dialect, ToolSet, call
from specllama.dialects.values import convert, param_schema

PAIR = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.S)


def decode(open_: str, body: str, tools: ToolSet, complete: bool):
    if not complete:
        return []
    head, _, rest = body.partition("<arg_key>")
    name = head.strip()
    rest = ("<arg_key>" + rest) if _ else ""
    arguments, left = {}, rest
    for match in PAIR.finditer(rest):
        key = match.group(1).strip()
        arguments[key] = convert(match.group(2), param_schema(tools.schemas, name, key))
        left = left.replace(match.group(0), "", 1)
    if left.strip() or not name or "\n" in name or "<" in name:
        return None
    one = call(name, arguments)
    return None if one is None else [one]


GLM = Dialect(
    name="glm",
    detect=lambda t: "<arg_key>" in t,
    regions=(("<tool_call>", "</tool_call>"),),
    decode=decode,
    think=("<think>", "</think>"),
    markers=("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
             "<think>", "</think>"),
    forced=lambda name: "<tool_call>" + (name or ""),
    stops=("</tool_call>",),
)
