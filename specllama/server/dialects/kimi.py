"""Kimi K2: `<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX
<|tool_call_argument_begin|>{...}<|tool_call_end|>...<|tool_calls_section_end|>`; thinking is
<think>...</think>. (Kimi K3's XTML is not parsed.)"""

from __future__ import annotations

import re

from specllama.server.dialects.dialect import Dialect, ToolSet, call, json_prefix

BEGIN, END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CALL = re.compile(r"<\|tool_call_begin\|>\s*(?:functions\.)?([^\s<]+?)(?::\d+)?\s*<\|tool_call_argument_begin\|>(.*?)"
                  r"<\|tool_call_end\|>", re.S)


def decode(open_: str, body: str, tools: ToolSet, complete: bool):
    calls, left = [], body
    for match in CALL.finditer(body):
        found = json_prefix(match.group(2))
        if found is None or found[1].strip():
            return None if complete else calls
        one = call(match.group(1), found[0])
        if one is None:
            return None if complete else calls
        calls.append(one)
        left = left.replace(match.group(0), "", 1)
    if left.strip():
        return calls if not complete else None
    return calls or (None if complete else [])


KIMI = Dialect(
    name="kimi-k2",
    detect=lambda t: BEGIN in t,
    regions=((BEGIN, END),),
    decode=decode,
    think=("<think>", "</think>"),
    markers=(BEGIN, END, "<|tool_call_begin|>", "<|tool_call_end|>", "<|tool_call_argument_begin|>",
             "<think>", "</think>"),
    forced=lambda name: BEGIN + "<|tool_call_begin|>functions." + (f"{name}:0<|tool_call_argument_begin|>" if name else ""),
)
