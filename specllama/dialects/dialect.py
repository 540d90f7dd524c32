"""One interface for every model family's way of writing thinking and tool calls.

A Dialect is mostly a table: its reasoning markers, the markers that open and close a region of
calls, the text a forced call begins with, the template text that gives it away. What cannot be a
table (how a region's text becomes calls) is one function per dialect. The streaming parser
(scanner.Scanner) is shared, so every dialect is split-invariant in the same way; GPT-OSS's harmony
channels are the one format with a parser of its own (harmony.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

from specllama.dialects.calls import ToolCall, new_call_id


@dataclass(frozen=True)
class ToolSet:
    """The offered functions: name -> parameters schema (values of XML-like formats are typed by it)."""

    schemas: dict[str, dict] = field(default_factory=dict)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.schemas)

    @classmethod
    def of(cls, tools) -> ToolSet:
        out = {}
        for tool in tools or ():
            function = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                params = function.get("parameters")
                out[function["name"]] = params if isinstance(params, dict) else {}
        return cls(out)


Decode = Callable[[str, str, ToolSet, bool], "list[ToolCall] | None"]


@dataclass(frozen=True)
class Dialect:
    name: str
    detect: Callable[[str], bool]  # the chat template's text -> whether it is this dialect's
    regions: tuple[tuple[str, str | None], ...] = ()  # (opening, closing or None: to the answer's end)
    decode: Decode | None = None  # (opening, region text, tools, complete) -> calls, or None: not calls
    think: tuple[str, str] | None = None  # the reasoning markers
    bare: Callable[[str, ToolSet], "list[ToolCall] | None"] | None = None  # a whole answer that is a call
    bare_starts: tuple[str, ...] = ()  # how such an answer begins (it is held to its end)
    markers: tuple[str, ...] = ()  # every control text the model writes (rendered, never leaked)
    forced: Callable[[str | None], str] | None = None  # a call's opening (required: None; named: NAME)
    stops: tuple[str, ...] = ()  # parallel_tool_calls false: the text after a first call's end
    calls_end_thinking: bool = False  # a call's opening inside the thinking ends it (Qwen3.5 forgets </think>)
    drop_after: tuple[str, ...] = ()  # a closing some models repeat after a call: not content
    parser_class: type | None = None  # a parser of its own (harmony), else scanner.Scanner (answer.py)

    def starts_thinking(self, prompt_text: str) -> bool:
        """Whether the template's generation prompt opened the thinking (Qwen3-Thinking, GLM-4.7 and
        Kimi K2 thinking write <think> into the prompt; "<think>\\n\\n</think>" closes it at once)."""
        if not self.think:
            return False
        open_, close = self.think
        return prompt_text.rfind(open_) > prompt_text.rfind(close)


def call(name: str, arguments: object) -> ToolCall | None:
    """A call from decoded parts; None when they are not a call (no name, arguments not an object)."""
    if isinstance(arguments, str):  # some models write the arguments as a JSON string, as OpenAI sends them
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return None
    if arguments is None:
        arguments = {}
    if not isinstance(name, str) or not name or not isinstance(arguments, dict):
        return None
    return ToolCall(new_call_id(), name, json.dumps(arguments, ensure_ascii=False))


def json_call(obj: object, keys: tuple[str, ...] = ("arguments", "parameters")) -> ToolCall | None:
    """{"name": ..., "arguments": {...}} (or "parameters", as Llama and some Qwen answers write)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    arguments = next((obj[k] for k in keys if k in obj), {})
    return call(obj["name"], arguments)


def json_prefix(text: str) -> tuple[object, str] | None:
    """The JSON value `text` begins with (after whitespace) and what follows it; None if none."""
    stripped = text.lstrip()
    try:
        value, end = json.JSONDecoder().raw_decode(stripped)
    except ValueError:
        return None
    return value, stripped[end:]
