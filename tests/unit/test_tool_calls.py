"""Tool calls parsed out of a model's text (server/tool_calls.py): the same content and calls for
any split of the text into streamed pieces, bad JSON given back as text, a forced opening."""

from __future__ import annotations

import json

import pytest

from specllama.server.tool_calls import ToolCall, ToolCallParser, split_calls

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}\n</tool_call>'
TWO = CALL + "\n" + CALL.replace("Paris", "Oslo")


def _stream(text: str, cuts: list[int], forced: str = "") -> tuple[str | None, list[ToolCall]]:
    parser = ToolCallParser(forced)
    parts = parser.first()
    for a, b in zip([0] + cuts, cuts + [len(text)]):
        parts += parser.feed(text[a:b])
    parts += parser.end()
    content = "".join(p for p in parts if isinstance(p, str))
    return content or None, [p for p in parts if isinstance(p, ToolCall)]


def _shape(result):
    content, calls = result
    return content, [(c.name, json.loads(c.arguments)) for c in calls]


@pytest.mark.parametrize("text, content, calls", [
    ("plain answer, no calls", "plain answer, no calls", []),
    ("text ends in a tag-like <tool", "text ends in a tag-like <tool", []),
    (CALL, None, [("get_weather", {"city": "Paris", "unit": "c"})]),
    ("Let me check.\n" + TWO + "\n", "Let me check.", [("get_weather", {"city": "Paris", "unit": "c"}),
                                                         ("get_weather", {"city": "Oslo", "unit": "c"})]),
    ('<tool_call>\n{"name": "f", "arguments": {"a": 1}}', None, [("f", {"a": 1})]),  # cut by a stop: still a call
    ('<tool_call>\n{"name": "f", "parameters": {"a": "x"}}\n</tool_call>', None, [("f", {"a": "x"})]),
    ('<tool_call>\n{"name": "f", "arguments": {"a": 1</tool_call> then', '<tool_call>\n{"name": "f", "arguments": '
     '{"a": 1</tool_call> then', []),  # bad JSON: the model's text, not a 500
    ('<tool_call>\n{"nom": "f"}\n</tool_call>', '<tool_call>\n{"nom": "f"}\n</tool_call>', []),
])
def test_whole_text_gives_content_and_calls(text, content, calls):
    assert _shape(split_calls(text)) == (content, calls)


@pytest.mark.parametrize("text", ["Let me check.\n" + TWO + "\n  trailing words", "a <b> c " + CALL,
                                  'x <tool_call>\n{"bad": </tool_call> y', "no calls at all\n\n"])
def test_every_split_into_pieces_gives_what_the_whole_text_gives(text):
    whole = _shape(split_calls(text))
    for cut in range(len(text) + 1):
        assert _shape(_stream(text, [cut])) == whole, cut
    assert _shape(_stream(text, list(range(1, len(text))))) == whole  # a character at a time


def test_a_forced_opening_is_parsed_with_the_answer():
    forced = '<tool_call>\n{"name": "get_weather", "arguments": '
    assert _shape(split_calls('{"city": "Rome"}}\n</tool_call>', forced)) == (None, [("get_weather", {"city": "Rome"})])


def test_each_call_has_its_own_id():
    _, calls = split_calls(TWO)
    assert len({c.id for c in calls}) == 2 and all(c.id.startswith("call_") for c in calls)


NAMES = frozenset({"get_weather", "get_time"})
FENCED_CALL = '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'  # Qwen2.5-Coder 1.5B's way


@pytest.mark.parametrize("text, content, names", [
    (FENCED_CALL, None, ["get_weather"]),
    ('{"name": "get_time", "arguments": {"city": "Oslo"}}', None, ["get_time"]),
    ('[{"name": "get_time", "arguments": {}}, {"name": "get_weather", "arguments": {"city": "Rome"}}]', None,
     ["get_time", "get_weather"]),
    ('```json\n{"name": "delete_all", "arguments": {}}\n```', '```json\n{"name": "delete_all", "arguments": {}}\n```', []),
    ('{"city": "Paris", "temp": 21}', '{"city": "Paris", "temp": 21}', []),  # JSON, but not a call
    ("```python\nprint('hi')\n```", "```python\nprint('hi')\n```", []),
    ("Sure: " + FENCED_CALL, "Sure: " + FENCED_CALL, []),  # a call only when the answer is one
])
def test_a_bare_or_fenced_json_call_to_an_offered_tool_is_a_call(text, content, names):
    got_content, calls = split_calls(text, names=NAMES)
    assert got_content == content and [c.name for c in calls] == names
    for cut in range(1, len(text)):  # streamed in two pieces: the same content and calls
        parser = ToolCallParser(names=NAMES)
        parts = parser.feed(text[:cut]) + parser.feed(text[cut:]) + parser.end()
        assert "".join(p for p in parts if isinstance(p, str)) == (content or "")
        assert [p.name for p in parts if isinstance(p, ToolCall)] == names


def test_without_offered_names_a_fenced_call_stays_text():
    assert split_calls(FENCED_CALL) == (FENCED_CALL, [])
