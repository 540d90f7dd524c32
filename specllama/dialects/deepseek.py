"""DeepSeek V3 / R1 / V3.1: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}
<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>` (V3 writes `function<｜tool▁sep｜>NAME` then a fenced JSON
block). V3.2 and V4 write DSML: `<｜DSML｜function_calls>` (V4: `tool_calls`, V4.1: ` calls`) around
`<｜DSML｜invoke name="NAME"><｜DSML｜parameter name="P" string="true|false">value</｜DSML｜parameter>
</｜DSML｜invoke>`, a string="true" value raw, any other JSON. Thinking is <think>...</think>."""

from __future__ import annotations

import re

from specllama.dialects.dialect import Dialect, ToolSet, call, json_prefix
from specllama.dialects.values import convert, param_schema

BEGIN, END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
SEP = "<｜tool▁sep｜>"
CALL = re.compile(r"<｜tool▁call▁begin｜>(.*?)<｜tool▁sep｜>(.*?)<｜tool▁call▁end｜>", re.S)
FENCE = re.compile(r"^\s*([^\n`]*?)\s*\n?```(?:json)?\s*(.*?)\s*```\s*$", re.S)
DSML = "<｜DSML｜"
DSML_SECTIONS = tuple((f"{DSML}{tag}>", f"</｜DSML｜{tag}>") for tag in ("function_calls", "tool_calls", " calls"))
INVOKE = re.compile(r'<｜DSML｜\s?invoke\s+name="([^"]*)"\s*(?:/>|>(.*?)</｜DSML｜\s?invoke>)', re.S)
PARAM = re.compile(r'<｜DSML｜\s?parameter\s+name="([^"]*)"(?:\s+string="(true|false)")?\s*>(.*?)</｜DSML｜\s?parameter>',
                   re.S)


def _gather(body: str, found, complete: bool):
    """The calls of (match, call or None) pairs in order; a region that is not all calls is text
    (None) once complete, and what decoded so far while it is still being written."""
    calls, left = [], body
    for match, one in found:
        if one is None:
            return None if complete else calls
        calls.append(one)
        left = left.replace(match.group(0), "", 1)
    if left.strip():
        return None if complete else calls
    return calls or (None if complete else [])


def _classic_call(match):
    kind, rest = match.group(1).strip(), match.group(2)
    fenced = FENCE.match(rest)
    if kind == "function" and fenced:  # V3: function<sep>NAME\n```json\n{...}\n```
        name, arguments = fenced.group(1), fenced.group(2)
    else:  # V3.1: NAME<sep>{...}
        name, arguments = kind, rest
    found = json_prefix(arguments)
    return call(name, found[0]) if found is not None and not found[1].strip() else None


def _dsml_call(match, tools: ToolSet):
    name, inner = match.group(1), match.group(2) or ""
    arguments, rest = {}, inner
    for param in PARAM.finditer(inner):
        key, raw, text = param.group(1), param.group(2), param.group(3)
        arguments[key] = text if raw == "true" else convert(text, param_schema(tools.schemas, name, key))
        rest = rest.replace(param.group(0), "", 1)
    return call(name, arguments) if not rest.strip() else None


def decode(open_: str, body: str, tools: ToolSet, complete: bool):
    if open_ == BEGIN:
        return _gather(body, ((m, _classic_call(m)) for m in CALL.finditer(body)), complete)
    return _gather(body, ((m, _dsml_call(m, tools)) for m in INVOKE.finditer(body)), complete)


DEEPSEEK = Dialect(
    name="deepseek",
    detect=lambda t: "tool▁calls▁begin" in t or "DSML" in t,
    regions=((BEGIN, END),) + DSML_SECTIONS,
    decode=decode,
    think=("<think>", "</think>"),
    markers=(BEGIN, END, "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", SEP, "｜DSML｜", "<think>", "</think>"),
    forced=lambda name: BEGIN + "<｜tool▁call▁begin｜>" + (f"{name}{SEP}" if name else ""),
)
