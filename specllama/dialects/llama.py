"""Llama 3.x: a call is the whole answer as bare JSON, `{"name": NAME, "parameters": {...}}` (several
joined by `;`), or follows `<|python_tag|>`. Llama 4 writes a Python list of calls, `[f(a=1), g()]`.
A bare answer counts as calls only when every name is an offered function: JSON that merely looks
like a call stays the answer it was."""

from __future__ import annotations

import ast
import json

from specllama.dialects.dialect import Dialect, ToolSet, call, json_call, json_prefix

TAG = "<|python_tag|>"
START, END = "<|python_start|>", "<|python_end|>"


def json_calls(text: str) -> list | None:
    """`{...}` or `{...}; {...}` or a JSON list of calls; None when the text is not only that."""
    calls, rest = [], text
    while rest.strip():
        found = json_prefix(rest)
        if found is None:
            return None
        value, rest = found
        for obj in value if isinstance(value, list) else [value]:
            one = json_call(obj)
            if one is None:
                return None
            calls.append(one)
        rest = rest.lstrip()
        if rest.startswith(";"):
            rest = rest[1:]
        elif rest:
            return None
    return calls or None


def python_calls(text: str) -> list | None:
    """Llama 4's `[f(a=1, b="x"), g()]`: literal arguments only (nothing is evaluated)."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None
    items = tree.elts if isinstance(tree, ast.List) else [tree]
    calls = []
    for item in items:
        if not isinstance(item, ast.Call) or item.args or not isinstance(item.func, (ast.Name, ast.Attribute)):
            return None
        try:
            arguments = {kw.arg: _literal(kw.value) for kw in item.keywords if kw.arg}
        except ValueError:
            return None
        name = item.func.id if isinstance(item.func, ast.Name) else ast.unparse(item.func)
        one = call(name, arguments)
        if one is None:
            return None
        calls.append(one)
    return calls or None


def _literal(node: ast.AST) -> object:
    value = ast.literal_eval(node)
    json.dumps(value)  # a set or bytes is not a JSON value: ValueError/TypeError
    return value


def bare(text: str, tools: ToolSet):
    body = text.strip()
    calls = python_calls(body) if body.startswith("[") and "(" in body else json_calls(body)
    if not calls or any(c.name not in tools.names for c in calls):
        return None
    return calls


def decode(open_: str, body: str, tools: ToolSet, complete: bool):
    if not complete:
        return []
    if open_ == START:  # Llama 4: <|python_start|>[f(a=1)]<|python_end|>
        return python_calls(body) or json_calls(body)
    return json_calls(body)


def forced(name: str | None) -> str:
    return '{"name": ' + (json.dumps(name, ensure_ascii=False) + ', "parameters": ' if name is not None else "")



LLAMA3 = Dialect(
    name="llama3",
    detect=lambda t: TAG in t or ("<|start_header_id|>" in t and '"parameters"' in t)
    or ("<|header_start|>" in t and "tool" in t),
    regions=((TAG, None), (START, END)),
    decode=decode,
    bare=bare,
    bare_starts=("{", "["),
    markers=(TAG, "<|eom_id|>", "<|eot_id|>", "<|python_start|>", "<|python_end|>"),
    forced=forced,
)
