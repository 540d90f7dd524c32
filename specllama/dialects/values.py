"""Argument values written as text (XML-like dialects: Qwen3-Coder, GLM, DeepSeek DSML) turned into
JSON values by the tool's schema, as those formats intend: a string parameter's text is the string
as written (no escaping in these formats); any other type's text is JSON (a number, true, an
object...). Text that is not valid JSON stays a string: the model's words are never dropped."""

from __future__ import annotations

import json


def param_schema(tools: dict[str, dict], name: str, param: str) -> dict | None:
    schema = tools.get(name) or {}
    props = schema.get("properties") if isinstance(schema, dict) else None
    value = props.get(param) if isinstance(props, dict) else None
    return value if isinstance(value, dict) else None


def _types(schema: dict | None) -> set[str]:
    if not schema:
        return set()
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    found: set[str] = set()
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or []:
            if isinstance(option, dict):
                found |= _types(option)
    if "enum" in schema and not found:
        found = {type_name(v) for v in schema["enum"]}
    return found


def type_name(value: object) -> str:
    return {str: "string", bool: "boolean", int: "integer", float: "number", type(None): "null"}.get(type(value), "object")


def convert(text: str, schema: dict | None) -> object:
    """One value's text as its JSON value, by the parameter's schema."""
    types = _types(schema)
    if types == {"string"} or (types and "string" in types and not _looks_json(text, types)):
        return text
    try:
        return json.loads(text)
    except ValueError:
        pass
    literal = PYTHON_LITERALS.get(text.strip())  # Qwen3-Coder writes Python's True / False / None at times
    if literal is not None and literal[0] in types | {"null"} - {"string"}:
        return literal[1]
    return text


PYTHON_LITERALS = {"True": ("boolean", True), "False": ("boolean", False), "None": ("null", None)}


def _looks_json(text: str, types: set[str]) -> bool:
    """A value whose schema allows a string and other types is the other type only when its text
    parses as one of them (`null` for a nullable string, 3 for integer-or-string)."""
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return type_name(value) in types or (type_name(value) == "integer" and "number" in types)
