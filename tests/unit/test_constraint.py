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


LINKED = {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"$ref": "#"}}, "required": ["v"]}
TREE = {"$defs": {"node": {"type": "object", "required": ["kids"],
                           "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
        "$ref": "#/$defs/node"}
EITHER = {"$defs": {"e": {"anyOf": [{"type": "integer"}, {"type": "object", "required": ["e"],
                                                            "properties": {"e": {"$ref": "#/$defs/e"}}}]}},
          "$ref": "#/$defs/e"}


@pytest.mark.parametrize("schema", [LINKED, TREE, EITHER, {"type": ["object", "null"], "required": ["x"],
                                                           "properties": {"x": {"$ref": "#"}}}])
def test_recursive_schemas_with_finite_instances_pass(schema):
    """Issue 41's check refuses only schemas whose every instance is infinite: a list whose `next`
    is optional, a tree whose children may be none, a recursion with a way out, are all fine."""
    check_constraint(Constraint("json_schema", schema=schema))


@pytest.mark.parametrize("schema, ref", [
    ({"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]}, "'#'"),
    ({"$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}, "minItems": 1}}, "$ref": "#/$defs/a"}, "#/$defs/a"),
    ({"$defs": {"a": {"type": "object", "properties": {"b": {"$ref": "#/$defs/b"}}, "required": ["b"]},
                "b": {"allOf": [{"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "required": ["a"]}]}},
      "$ref": "#/$defs/a"}, "#/$defs/"),
    ({"type": "object", "required": ["x"], "properties": {"x": False}}, "can never be valid"),
])
def test_schemas_whose_every_instance_is_infinite_are_refused_naming_the_ref(schema, ref):
    with pytest.raises(SpecllamaError, match="has no (finite )?instance") as caught:
        check_constraint(Constraint("json_schema", schema=schema))
    assert ref in str(caught.value)


def test_a_panic_inside_the_grammar_engine_is_a_refusal_not_a_crash():
    """llguidance panicked cutting this schema's error message at byte 100, inside a 3-byte character; the
    panic reached Python as a BaseException no `except Exception` catches (serve answered 500)."""
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": {
        "type": {"type": False, "content": 6.103515625e-05, "text": False}, "text": {"type": None, "text": "0\x1f\u0800"}}}}}
    with pytest.raises(SpecllamaError) as caught:
        check_constraint(Constraint("json_schema", schema=schema))
    assert "grammar engine failed" in str(caught.value) and "\n" not in str(caught.value)


def test_a_panic_in_a_requests_grammar_fails_that_request_as_a_grammar_fault():
    from specllama.decoding.grammar import GrammarFault, _fails_the_request

    class PanicException(BaseException):  # pyo3's name for a Rust panic: a BaseException
        pass

    class Panicking:
        @_fails_the_request
        def mask(self):
            raise PanicException("index out of bounds")

        @_fails_the_request
        def interrupted(self):
            raise KeyboardInterrupt

    with pytest.raises(GrammarFault, match="index out of bounds"):
        Panicking().mask()
    with pytest.raises(KeyboardInterrupt):  # only panics are turned into the request's failure
        Panicking().interrupted()
