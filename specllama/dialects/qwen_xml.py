"""Qwen3-Coder, Qwen3.5 and later: `<tool_call>\\n<function=NAME>\\n<parameter=P>\\nvalue\\n
</parameter>\\n</function>\\n</tool_call>`. Values are raw text typed by the tool's schema
(values.py); the newline on each side of a value is the format's, not the value's."""

from __future__ import annotations

import re

from specllama.dialects.dialect import Dialect, ToolSet, call
from specllama.dialects.values import convert, param_schema

FUNCTION = re.compile(r"<function=([^>\n]*)>(.*?)</function>", re.S)
# A value ends at its </parameter> (on a line of its own when the value holds more lines), or where
# the next parameter or the function's end begins (a model may forget the closing).
PARAMETER = re.compile(r"<parameter=([^>\n]*)>\n?(.*?)(\n</parameter>|</parameter>(?=\s*(?:<parameter=|$))|(?=\n<parameter=)|$)",
                       re.S)


def _value(match: re.Match) -> str:
    """The value between the newline after its opening and the one before its closing (those two
    are the format's); a value cut off by the function's end keeps all but a last newline."""
    text = match.group(2)
    return text[:-1] if not match.group(3) and text.endswith("\n") else text


def decode(open_: str, body: str, tools: ToolSet, complete: bool):
    if not complete:
        return []
    text = body if open_ == "<tool_call>" else open_ + body + "</function>"  # a bare <function=...> region
    calls = []
    rest = text
    for match in FUNCTION.finditer(text):
        name = match.group(1).strip()
        arguments = {}
        for param in PARAMETER.finditer(match.group(2)):
            key = param.group(1).strip()
            arguments[key] = convert(_value(param), param_schema(tools.schemas, name, key))
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
    calls_end_thinking=True,
    drop_after=("</tool_call>",),
    stops=("</tool_call>",),
)
