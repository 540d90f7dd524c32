"""What a request's output must match: a JSON schema, any JSON object, a Lark grammar or a regex,
possibly only from a trigger string on (a tool call's opening). The shared shape between the
server's request parsing (response_format, tools) and the grammar engine (grammar.py).

A Constraint is plain data: the grammar engine compiles it per request. `check_constraint` refuses
what cannot be honoured before anything is decoded, with one line naming the feature (the server
answers 400 with it). The compile check needs llguidance (a runtime dependency); it is imported
only when a constraint is checked, so constructing one costs nothing.
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from specllama.decoding.schema_finite import unsatisfiable_ref
from specllama.errors import SpecllamaError

KINDS = ("json_object", "json_schema", "lark", "regex")

# How JSON is laid out: no free whitespace (a small model given free whitespace can emit newlines
# until max_tokens), one space after ':' and ','. Fixed separators are also tokens the grammar
# forces, which are free drafts (grammar-aware speculation).
JSON_LAYOUT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


@dataclass(frozen=True)
class Constraint:
    kind: str  # "json_object" | "json_schema" | "lark" | "regex"
    schema: dict | None = None  # json_schema (and json_object: None)
    grammar: str | None = None  # lark (llguidance's Lark dialect, %json{...} allowed) or regex
    trigger: str | None = None  # lazy: unconstrained until the generated text ends with this
    #                             (e.g. "<tool_call>"); then the grammar applies from there on
    strict: bool = True  # json_schema: refuse keywords the engine cannot enforce (False: ignore them)


def lark_json(schema: dict) -> str:
    """A schema for a Lark grammar's `%json{...}` with this module's JSON layout (a bare %json
    allows free whitespace, which a small model can fill until max_tokens)."""
    return json.dumps({**schema, "x-guidance": JSON_LAYOUT})


@contextmanager
def engine_panics(what: str, error: type[SpecllamaError] = SpecllamaError) -> Iterator[None]:
    """llguidance's Rust panics inside the block raised as `error` ("WHAT: the panic's first line").
    Why: a panic reaches Python as pyo3's PanicException, a BaseException, which no `except Exception`
    catches: a fuzzed schema whose error message held a 3-byte character across byte 100 made
    validate_grammar panic while it cut the message short ("end byte index 100 is not a char
    boundary"), and serve answered 500 with a traceback (tests/integration/test_serve_mutated_bodies)."""
    try:
        yield
    except BaseException as e:
        if type(e).__name__ != "PanicException":
            raise
        raise error(f"{what}: {_first_line(str(e))}") from None


def check_constraint(c: Constraint, tokenizer: Any = None, text: str | None = None) -> None:
    """Raise a SpecllamaError naming what cannot be enforced (an unknown kind, a missing schema,
    an unsupported JSON-schema keyword, a grammar that does not compile). `tokenizer`: an
    llguidance LLTokenizer, when the check should also cover the vocabulary (special tokens named
    in a Lark grammar); None checks the grammar alone. `text`: grammar_text(c) where the caller
    has it already (the grammar engine, which compiles it next)."""
    from llguidance import LLMatcher  # noqa: PLC0415 (a runtime dependency, loaded when needed)

    text = grammar_text(c) if text is None else text
    with engine_panics(_engine_failed(c)):
        error = LLMatcher.validate_grammar(text, tokenizer)
    if error:
        raise SpecllamaError(f"{_label(c)} cannot be enforced: {_first_line(error)}")


def grammar_text(c: Constraint) -> str:
    """The constraint as an llguidance grammar (its JSON form, which embeds Lark, regex or a
    schema); a SpecllamaError for a malformed constraint."""
    if c.kind not in KINDS:
        raise SpecllamaError(f"unknown constraint kind '{c.kind}': choose one of {', '.join(KINDS)}")
    with engine_panics(_engine_failed(c)):
        return _grammar_text(c)


def _grammar_text(c: Constraint) -> str:
    from llguidance import LLMatcher  # noqa: PLC0415

    if c.trigger is not None and not c.trigger:
        raise SpecllamaError("a constraint's trigger must not be empty")
    if c.kind == "json_object":
        return LLMatcher.grammar_from_json_schema({"type": "object"}, overrides=dict(JSON_LAYOUT))
    if c.kind == "json_schema":
        if not isinstance(c.schema, dict):
            raise SpecllamaError("a json_schema constraint needs its schema as a JSON object")
        try:
            json.dumps(c.schema)
        except (TypeError, ValueError) as e:
            raise SpecllamaError(f"the JSON schema is not JSON: {e}") from None
        why = schema_problem(c.schema)
        if why:
            raise SpecllamaError(f"the JSON schema {why}")
        options = dict(JSON_LAYOUT, lenient=not c.strict)
        try:
            return LLMatcher.grammar_from_json_schema(c.schema, overrides=options)
        except ValueError as e:
            raise SpecllamaError(f"the JSON schema cannot be read: {_first_line(str(e))}") from None
    if not isinstance(c.grammar, str) or not c.grammar:
        raise SpecllamaError(f"a {c.kind} constraint needs its grammar text")
    if c.kind == "lark":
        return LLMatcher.grammar_from_lark(c.grammar)
    return LLMatcher.grammar_from_regex(c.grammar)


def schema_problem(schema: dict) -> str | None:
    """Why no answer could meet this schema (it has no finite instance), or None."""
    ref = unsatisfiable_ref(schema)
    if ref is None:
        return None
    if not ref:
        return "has no instance: a required property or item can never be valid (its schema is false)"
    return (f"has no finite instance: every value of '{ref}' must contain another one (through required properties "
            "or minItems), so no answer could ever be complete")


def _engine_failed(c: Constraint) -> str:
    return f"{_label(c)} cannot be enforced: the grammar engine failed on it"


def _label(c: Constraint) -> str:
    return {"json_object": "the JSON object format", "json_schema": "the JSON schema",
            "lark": "the Lark grammar", "regex": "the regex"}.get(c.kind, "the constraint")


def _first_line(message: str) -> str:
    """An llguidance error's one line. A regex error spans lines ("regex parse error:", the
    pattern, a caret, "error: unclosed group"): its first line alone said nothing (issue 41), so
    it is the reason and the pattern. An error inside a Lark grammar's %json starts with its place
    in the grammar ("at 2(7): "), which is ours, not the client's: dropped."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if not lines:
        return "unknown error"
    if lines[0].endswith("regex parse error:") and len(lines) > 1:
        reasons = [line.removeprefix("error:").strip() for line in lines if line.startswith("error:")]
        head = lines[0].removesuffix("regex parse error:")
        return f"{head}regex parse error: {reasons[-1] if reasons else 'invalid'} in {lines[1]!r}"
    return re.sub(r"^at \d+\(\d+\): ", "", lines[0])
