"""The grammars tool calls are held to (server/tools.py) compile in llguidance over a real Qwen
vocabulary, accept the calls Qwen2.5's template asks for, token by token as the model would write
them, and refuse a wrong function or arguments outside the schema. (Enforcing them while decoding
is the grammar engine's; this checks what the server hands it.)"""

from __future__ import annotations

import warnings

import pytest
from llguidance import LLMatcher
from llguidance.llamacpp import lltokenizer_from_vocab

from specllama.decoding.constraint import check_constraint
from specllama.llama.model import GGUFModel
from specllama.server.tools import parse_tools, tool_constraint

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time"}}


@pytest.fixture(scope="module")
def vocab(tiny_models):
    model = GGUFModel(tiny_models["a"], vocab_only=True)  # Qwen2.5's tokenizer, <tool_call> tokens included
    with warnings.catch_warnings():  # llguidance reads each token's attributes through a deprecated name
        warnings.simplefilter("ignore", DeprecationWarning)
        tokenizer = lltokenizer_from_vocab(model._vocab)
    yield model, tokenizer
    model.close()


def _accepts(vocab, choice, text: str, parallel: bool = True) -> bool:
    model, tokenizer = vocab
    use = parse_tools({"tools": [WEATHER, TIME], "tool_choice": choice, "parallel_tool_calls": parallel})
    ids = {t: model.tokenize(t, add_special=False) for t in ("<tool_call>", "</tool_call>")}
    assert all(len(v) == 1 for v in ids.values())
    constraint = tool_constraint(use, f"<[{ids['<tool_call>'][0]}]>", f"<[{ids['</tool_call>'][0]}]>")
    check_constraint(constraint, tokenizer)
    assert constraint.trigger == ("<tool_call>" if choice == "auto" else None)
    matcher = LLMatcher(tokenizer, LLMatcher.grammar_from_lark(constraint.grammar))
    tokens = model.tokenize(text, add_special=False)
    return matcher.validate_tokens(tokens) == len(tokens) and matcher.consume_tokens(tokens) and matcher.is_accepting()


CALL = '{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n</tool_call>'


@pytest.mark.parametrize("choice, text, ok", [
    ("auto", "\n" + CALL, True),  # after the trigger <tool_call>
    ("auto", "\n" + CALL + '\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>', True),
    ("auto", '\n{"name": "get_wether", "arguments": {"city": "Paris"}}\n</tool_call>', False),
    ("auto", '\n{"name": "get_weather", "arguments": {"days": 2}}\n</tool_call>', False),  # city is required
    ("auto", '\n{"name": "get_weather", "arguments": {"city": "Paris", "days": "two"}}\n</tool_call>', False),
    ("required", CALL, True),  # after the forced "<tool_call>\n"
    ({"type": "function", "function": {"name": "get_weather"}}, '{"city": "Oslo"}}\n</tool_call>', True),
    ({"type": "function", "function": {"name": "get_weather"}}, '{"town": "Oslo"}}\n</tool_call>', False),
])
def test_tool_grammars_take_the_calls_the_template_asks_for_and_nothing_else(vocab, choice, text, ok):
    assert _accepts(vocab, choice, text) == ok


def test_without_parallel_calls_one_call_ends_the_grammar(vocab):
    two = "\n" + CALL + '\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
    assert _accepts(vocab, "auto", "\n" + CALL, parallel=False)
    assert not _accepts(vocab, "auto", two, parallel=False)


def test_choice_none_has_no_grammar():
    assert tool_constraint(parse_tools({"tools": [WEATHER], "tool_choice": "none"}), "a", "b") is None
