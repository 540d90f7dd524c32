"""Gemma 4: `<|tool_call>call:NAME{key:value,...}<tool_call|>`, in an object notation of its own:
bare keys, strings between `<|"|>` marks, JSON numbers, true/false/null, nested {} and [].
Thinking is the thought channel, `<|channel>thought ... <channel|>`."""

from __future__ import annotations

import json
import re

from specllama.dialects.dialect import Dialect, ToolSet, call

OPEN, CLOSE, QUOTE = "<|tool_call>", "<tool_call|>", '<|"|>'
STRING = re.compile(re.escape(QUOTE) + r"(.*?)" + re.escape(QUOTE), re.S)
KEY = re.compile(r"([{,]\s*)([^{}\[\],:\"\x00]+?)\s*:")  # bare keys, spaces allowed ("key with space")
HEAD = re.compile(r"\s*call:([^{\s]+)\s*(\{.*\})\s*$", re.S)


def to_json(text: str) -> object:
    """Gemma's object notation as a JSON value (ValueError when it is not one)."""
    strings: list[str] = []

    def hold(match: re.Match) -> str:
        strings.append(match.group(1))
        return f"\x00{len(strings) - 1}\x00"

    held = STRING.sub(hold, text)
    if QUOTE in held:
        raise ValueError("an unclosed string")
    held = KEY.sub(lambda m: m.group(1) + json.dumps(m.group(2)) + ":", held)
    held = re.sub(r"\x00(\d+)\x00", lambda m: json.dumps(strings[int(m.group(1))], ensure_ascii=False), held)
    return json.loads(held)


def decode(open_: str, body: str, tools: ToolSet, complete: bool):
    if not complete:
        return []
    head = HEAD.match(body)
    if head is None:
        return None
    try:
        arguments = to_json(head.group(2))
    except ValueError:
        return None
    one = call(head.group(1), arguments)
    return None if one is None else [one]


GEMMA4 = Dialect(
    name="gemma4",
    detect=lambda t: OPEN in t,
    regions=((OPEN, CLOSE),),
    decode=decode,
    think=("<|channel>thought", "<channel|>"),
    markers=(OPEN, CLOSE, QUOTE, "<|channel>", "<channel|>"),
    forced=lambda name: OPEN + "call:" + (name + "{" if name else ""),
    stops=(CLOSE,),
)
