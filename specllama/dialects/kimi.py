"""Kimi K2: `<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX
<|tool_call_argument_begin|>{...}<|tool_call_end|>...<|tool_calls_section_end|>`; thinking is
<think>...</think>. (Kimi K3's XTML is not parsed.)"""

from __future__ import annotations

import re

from specllama.dialects.dialect import Dialect, ToolSet, call, json_prefix

BEGIN, END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
BEGIN_CALL, ARGS, END_CALL = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
CALL_ID = re.compile(r"\s*(?:functions\.)?([^\s<]+?)(?::\d+)?\s*$", re.S)


def decode(open_: str, body: str, tools: ToolSet, complete: bool):
    """Each call from its <|tool_call_begin|>: the id, then the arguments up to the first
    <|tool_call_end|> at which they are whole JSON (the marker may be in a string). Text between
    calls is noise the section holds (dropped, as the format has no content there)."""
    calls, rest = [], body
    while True:
        at = rest.find(BEGIN_CALL)
        if at < 0:
            break
        rest = rest[at + len(BEGIN_CALL):]
        head, sep, tail = rest.partition(ARGS)
        name = CALL_ID.match(head) if sep else None
        end, found = tail.find(END_CALL), None
        while name and end >= 0:
            found = json_prefix(tail[:end])
            if found is not None and not found[1].strip():
                break
            found, end = None, tail.find(END_CALL, end + 1)
        if found is None:
            if complete and END_CALL in rest:
                return None
            return calls if calls or not complete else None  # the last call was cut short
        one = call(name.group(1), found[0])
        if one is None:
            return None if complete else calls
        calls.append(one)
        rest = tail[end + len(END_CALL):]
    return calls


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
