"""A request's tools: `tools`, `tool_choice` and `parallel_tool_calls` checked, the messages that
carry calls and results made ready for the chat template, and the grammar a call must follow.

How a choice is honoured, with or without the grammar engine:
- "auto": the tools are in the prompt; a lazy grammar (trigger "<tool_call>") holds a call's JSON
  to one of the functions' schemas once the model opens one.
- "required": the answer is begun with "<tool_call>\\n" in the prompt, so a call is certain; the
  grammar holds it to the functions.
- a named function: the answer is begun with the call's opening up to its arguments
  (`<tool_call>\\n{"name": "NAME", "arguments": `), so that function is called whatever the
  grammar engine does (llama-server turns a named choice into "auto"); the grammar holds the
  arguments to its schema.
- "none": the tools stay out of the prompt and nothing is parsed.
`parallel_tool_calls: false` ends the answer at the first call's closing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from specllama.decoding.constraint import JSON_LAYOUT, Constraint, schema_problem
from specllama.dialects import HERMES, Dialect
from specllama.server.api_errors import invalid
from specllama.server.tool_calls import OPEN

CHOICES = ("auto", "none", "required")


@dataclass(frozen=True)
class ToolUse:
    tools: tuple[dict, ...]  # OpenAI function tools, as the template gets them
    choice: str  # "auto" | "none" | "required" | "function"
    name: str | None = None  # the function a named choice forces
    parallel: bool = True

    @property
    def template_tools(self) -> list[dict] | None:
        return None if self.choice == "none" else list(self.tools)

    @property
    def parses(self) -> bool:
        return self.choice != "none"

    @property
    def forced(self) -> str:
        """The answer's start for the Hermes dialect (see opening)."""
        return self.opening(HERMES)

    def opening(self, dialect: Dialect | None) -> str:
        """The answer's start, written into the prompt: what makes a call certain, in the
        dialect's own opening (a named function's opening names it)."""
        if dialect is None or dialect.forced is None or self.choice not in ("required", "function"):
            return ""
        return dialect.forced(self.name if self.choice == "function" else None)

    def stops(self, dialect: Dialect | None = None) -> tuple[str, ...]:
        """parallel_tool_calls false: the answer ends where the dialect's first call does."""
        dialect = dialect or HERMES
        return () if self.parallel or not self.parses else dialect.stops

    def schema(self, name: str) -> dict:
        for tool in self.tools:
            if tool["function"]["name"] == name:
                return tool["function"].get("parameters") or {"type": "object"}
        raise KeyError(name)


def parse_tools(body: dict) -> ToolUse | None:
    """The request's tools, or None when it sends none (null and [] are what clients send then)."""
    if body.get("functions") or body.get("function_call"):
        raise invalid("'functions' and 'function_call' are the deprecated forms: send 'tools' and 'tool_choice'",
                      "functions")
    tools = body.get("tools")
    if not tools:
        choice = body.get("tool_choice")
        if choice is not None and choice not in ("auto", "none"):  # a call that cannot be made: refused, not ignored
            raise invalid("'tool_choice' asks for a tool call but the request has no 'tools'", "tool_choice")
        return None
    if not isinstance(tools, list):
        raise invalid("'tools' must be an array of {\"type\": \"function\", \"function\": {...}}", "tools")
    names = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
            raise invalid(f"{where} must be {{\"type\": \"function\", \"function\": {{\"name\": ..., ...}}}} "
                          "(only function tools are supported)", where)
        function = tool["function"]
        if not isinstance(function.get("name"), str) or not function["name"]:
            raise invalid(f"{where}.function.name must be a non-empty string", f"{where}.function.name")
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise invalid(f"{where}.function.parameters must be a JSON schema object", f"{where}.function.parameters")
        why = schema_problem(parameters) if parameters else None
        if why:
            raise invalid(f"{where}.function.parameters: the schema {why}", f"{where}.function.parameters")
        names.append(function["name"])
    if len(set(names)) != len(names):
        raise invalid("two tools have the same name", "tools")
    choice, name = _choice(body.get("tool_choice"), names)
    parallel = body.get("parallel_tool_calls", True)
    if parallel is None:
        parallel = True
    if not isinstance(parallel, bool):
        raise invalid("'parallel_tool_calls' must be true or false", "parallel_tool_calls")
    return ToolUse(tuple(tools), choice, name, parallel)


def _choice(choice: object, names: list[str]) -> tuple[str, str | None]:
    if choice is None:
        return "auto", None
    if isinstance(choice, str):
        if choice not in CHOICES:
            raise invalid(f"'tool_choice' must be one of {', '.join(CHOICES)} or {{\"type\": \"function\", "
                          f"\"function\": {{\"name\": ...}}}}, got {choice!r}", "tool_choice")
        return choice, None
    name = choice.get("function", {}).get("name") if isinstance(choice, dict) and isinstance(
        choice.get("function"), dict) else None
    if not isinstance(choice, dict) or choice.get("type") != "function" or not isinstance(name, str):
        raise invalid("'tool_choice' as an object must be {\"type\": \"function\", \"function\": {\"name\": ...}}",
                      "tool_choice")
    if name not in names:
        raise invalid(f"'tool_choice' names the function '{name}', which is not among the tools "
                      f"({', '.join(names)})", "tool_choice")
    return "function", name


def template_message(message: dict, role: str, content: str, where: str) -> dict:
    """One message as the chat template wants it: an assistant's tool calls with their arguments
    as objects (OpenAI sends a JSON string, which `tojson` would quote), a tool result with its id."""
    out = {"role": role, "content": content}
    if role == "tool":
        call_id = message.get("tool_call_id")
        if call_id is not None and not isinstance(call_id, str):
            raise invalid(f"{where}.tool_call_id must be a string", f"{where}.tool_call_id")
        out["tool_call_id"] = call_id or ""
        if isinstance(message.get("name"), str):
            out["name"] = message["name"]
    if role == "assistant" and isinstance(message.get("reasoning_content"), str):
        out["reasoning_content"] = message["reasoning_content"]  # an earlier turn's thinking: the template decides
    calls = message.get("tool_calls") if role == "assistant" else None
    if calls:
        if not isinstance(calls, list):
            raise invalid(f"{where}.tool_calls must be an array", f"{where}.tool_calls")
        out["tool_calls"] = [_template_call(call, f"{where}.tool_calls[{i}]") for i, call in enumerate(calls)]
    return out


def _template_call(call: object, where: str) -> dict:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise invalid(f"{where} must be {{\"id\": ..., \"type\": \"function\", \"function\": {{\"name\": ..., "
                      "\"arguments\": ...}}}}", where)
    if call.get("id") is not None and not isinstance(call.get("id"), str):
        raise invalid(f"{where}.id must be a string", f"{where}.id")
    arguments = function.get("arguments")
    if arguments is not None and not isinstance(arguments, (str, dict)):
        raise invalid(f"{where}.function.arguments must be a JSON string or an object", f"{where}.function.arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            raise invalid(f"{where}.function.arguments is not JSON", f"{where}.function.arguments") from None
    return {"id": call.get("id") or "", "type": "function",
            "function": {"name": function["name"], "arguments": arguments if arguments is not None else {}}}


def has_tool_turns(messages: list[dict]) -> bool:
    return any(m["role"] == "tool" or m.get("tool_calls") for m in messages)


def tool_constraint(use: ToolUse, open_token: str, close_token: str, answer: Constraint | None = None) -> Constraint | None:
    """The Hermes grammar (llguidance's Lark, %json for each function's arguments), from where the
    answer's forced start leaves off. `open_token` / `close_token`: how the grammar names
    <tool_call> and </tool_call> (`<[id]>` where each is one special token of the vocabulary, whose
    text a plain string in the grammar would not match). `answer`: the request's response_format,
    which an answer that is not a call must follow (issue 41: it was silently dropped): under
    "none" it is the whole constraint; under "auto" the answer is either calls or that JSON (a
    grammar from the first token, no longer lazy); a forced call's answer is the call alone."""
    if not use.parses:
        return answer
    if answer is not None and use.choice == "auto":
        return _calls_or_answer(use, open_token, close_token, answer)
    lines = []
    if use.choice == "function":
        lines.append(f'start: args_0 "}}" "\\n" {close_token}')
        lines.append("args_0: %json " + _schema_text(use, use.name))
        return Constraint(kind="lark", grammar="\n".join(lines))
    more = f' ("\\n" {open_token} "\\n" call "\\n" {close_token})*' if use.parallel else ""
    first = 'call "\\n" ' + close_token if use.choice == "required" else '"\\n" call "\\n" ' + close_token
    lines.append(f"start: {first}{more}")
    names = [tool["function"]["name"] for tool in use.tools]
    lines.append("call: " + " | ".join(f"call_{i}" for i in range(len(names))))
    for i, name in enumerate(names):
        head = json.dumps('{"name": ' + json.dumps(name, ensure_ascii=False) + ', "arguments": ', ensure_ascii=False)
        lines.append(f'call_{i}: {head} args_{i} "}}"')
        lines.append(f"args_{i}: %json " + _schema_text(use, name))
    return Constraint(kind="lark", grammar="\n".join(lines), trigger=OPEN if use.choice == "auto" else None)


def _calls_or_answer(use: ToolUse, open_token: str, close_token: str, answer: Constraint) -> Constraint:
    lazy = tool_constraint(use, open_token, close_token)
    calls = [line for line in lazy.grammar.splitlines() if not line.startswith("start:")]
    more = f' ("\\n" {open_token} "\\n" call "\\n" {close_token})*' if use.parallel else ""
    start = f'start: answer | {open_token} "\\n" call "\\n" {close_token}{more}'
    return Constraint(kind="lark", grammar="\n".join([start, answer_rule(answer), *calls]))


def answer_rule(answer: Constraint) -> str:
    """The Lark rule `answer` for a response_format (json_object: any object) beside a call grammar."""
    schema = answer.schema if answer.kind == "json_schema" else {"type": "object"}
    options = {**JSON_LAYOUT, "lenient": not answer.strict}
    return "answer: %json " + json.dumps({**schema, "x-guidance": options}, ensure_ascii=False)


def _schema_text(use: ToolUse, name: str) -> str:
    """The function's schema with the JSON layout the template's example shows; lenient (unknown
    keywords ignored) unless the function says `strict`, as OpenAI treats non-strict functions."""
    strict = any(t["function"]["name"] == name and t["function"].get("strict") for t in use.tools)
    options = {**JSON_LAYOUT, "lenient": not strict}
    return json.dumps({**use.schema(name), "x-guidance": options}, ensure_ascii=False)
