"""Qwen3-Coder, Qwen3.5 and later: `<tool_call>\\n<function=NAME>\\n<parameter=P>\\nvalue\\n
</parameter>\\n</function>\\n</tool_call>`. Values are raw text typed by the tool's schema
(values.py); the newline on each side of a value is the format's, not the value's."""

from __future__ import annotations

import re

from specllama.server.dialects.dialect import Dialect, ToolSet, call
from specllama.server.dialects.values import convert, param_schema

FUNCTION = re.compile(r"<function=([^>\n]*)>(.*?)(?:</function>|$)", re.S)
PARAMETER = re.compile(r"<parameter=([^>\n]*)>(.*?)(?:</parameter>|(?=<parameter=)|$)", re.S)


def _value(text: str) -> str:
    if text.startswith("\n"):
        text = text[1:]
    if text.endswith("\n"):
        text = text[:-1]
    return text


def decode(open_: str, body: str, tools: ToolSet, complete: bool):
    text = (open_ if open_ != "<tool_call>" else "") + body
    if not complete:
        return []
    calls = []
    rest = text
    for match in FUNCTION.finditer(text):
        name = match.group(1).strip()
        arguments = {}
        for param in PARAMETER.finditer(match.group(2)):
            key = param.group(1).strip()
            arguments[key] = convert(_value(param.group(2)), param_schema(tools.schemas, name, key))
        one = call(name, arguments)
        if one is None:
            return None
        calls.append(one)
        rest = rest.replace(match.group(0), "", 1)
    if not calls or rest.replace("</tool_call>", "").strip():
        return None
    return calls


def forced(name: str | None) -> str:
    return "<tool_call>\n<function=" if name is None else f"<tool_call>\n<function={name}>\n"


QWEN_XML = Dialect(
    name="qwen3-xml",
    detect=lambda t: "<function=" in t and "<parameter=" in t,
    regions=(("<tool_call>", "</tool_call>"), ("<function=", "</function>")),
    decode=decode,
    think=("<think>", "</think>"),
    markers=("<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>",
             "<think>", "</think>"),
    forced=forced,
    drop_after=("</tool_call>",),
    stops=("</tool_call>",),
)
