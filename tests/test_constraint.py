"""The shared constraint shape (decoding/constraint.py): what it refuses before anything is
decoded, with the feature named, and what it lets through."""

import json

import pytest

from specllama.decoding.constraint import Constraint, check_constraint, grammar_text
from specllama.decoding.request import GenerationConfig
from specllama.errors import SpecllamaError


@pytest.mark.parametrize("constraint", [
    Constraint("json_object"),
    Constraint("json_schema", schema={"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
    Constraint("json_schema", schema={"type": "array", "items": {"enum": ["x", "y"]}, "minItems": 1}),
    Constraint("lark", grammar='start: "yes" | "no"'),
    Constraint("lark", grammar='start: "<call>" %json{"type": "object"}', trigger="<tool_call>"),
    Constraint("regex", grammar=r"\d{3}-\d{4}"),
])
def test_supported_constraints_pass_the_check(constraint):
    check_constraint(constraint)


@pytest.mark.parametrize("constraint, named", [
    (Constraint("json_schema", schema={"type": "array", "uniqueItems": True}), "uniqueItems"),
    (Constraint("json_schema", schema={"not": {"type": "string"}}), "not"),
    (Constraint("json_schema", schema={"type": "bogus"}), "bogus"),
    (Constraint("json_schema", schema=None), "schema"),
    (Constraint("xml"), "xml"),
    (Constraint("lark", grammar="start: missing_rule"), "missing_rule"),
    (Constraint("regex", grammar="a(b"), "regex"),
    (Constraint("regex"), "grammar"),
    (Constraint("json_object", trigger=""), "trigger"),
])
def test_what_cannot_be_enforced_is_refused_naming_it(constraint, named):
    with pytest.raises(SpecllamaError) as caught:
        check_constraint(constraint)
    message = str(caught.value)
    assert named in message and "\n" not in message


def test_a_lenient_schema_ignores_what_strict_refuses():
    schema = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    check_constraint(Constraint("json_schema", schema=schema, strict=False))
    with pytest.raises(SpecllamaError, match="uniqueItems"):
        check_constraint(Constraint("json_schema", schema=schema, strict=True))


def test_json_layout_is_fixed_so_separators_are_forced():
    # No free whitespace (a small model can emit newlines forever), fixed separators (forced tokens).
    grammar = json.loads(grammar_text(Constraint("json_object")))["grammars"][0]["json_schema"]
    assert grammar["x-guidance"] == {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


def test_a_generation_config_carries_its_constraint():
    c = Constraint("json_object")
    assert GenerationConfig(constraint=c).constraint is c
    assert GenerationConfig().constraint is None
