"""Each model family's dialect (dialects/): found from the chat template's text; thinking,
content and calls the same for every split of the text (streamed or whole); a forced opening
continued into a call; the grammars written per dialect compile and take that dialect's calls.
(canitoolcall's fixtures, test_canitoolcall.py, replay recorded outputs of each family too.)"""

from __future__ import annotations

import itertools
import json
import warnings

import pytest

from specllama.dialects import BY_NAME, DIALECTS, Reasoning, ToolSet, detect
from specllama.dialects.answer import AnswerParser, split_answer
from specllama.server.tool_calls import ToolCall

# The text of each family's template that gives it away (short excerpts of what the real ones hold).
TEMPLATES = {
    "hermes": "<|im_start|>system\n# Tools\n<tools></tools>\n<tool_call>\n{\"name\": <function-name>, "
              "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>{% if enable_thinking %}<think>{% endif %}",
    "qwen3-xml": "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue\n"
                 "</parameter>\n</function>\n</tool_call>",
    "llama3": "<|start_header_id|>ipython<|end_header_id|>{\"name\": function name, \"parameters\": dictionary}"
              "<|python_tag|><|eom_id|>",
    "mistral": "[AVAILABLE_TOOLS]{{ tools|tojson }}[/AVAILABLE_TOOLS][TOOL_CALLS]{{ name }}[ARGS]{{ arguments }}",
    "deepseek": "<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>{{ name }}<｜tool▁sep｜>{{ args }}",
    "glm": "<tool_call>{{ name }}<arg_key>{{ k }}</arg_key><arg_value>{{ v }}</arg_value></tool_call>",
    "kimi-k2": "<|tool_calls_section_begin|><|tool_call_begin|>functions.{{ name }}:0<|tool_call_argument_begin|>",
    "gemma4": "<|tool_call>call:{{ name }}{<|\"|>...<|\"|>}<tool_call|>",
    "harmony": "<|start|>assistant<|channel|>commentary to=functions.{{ name }} <|constrain|>json<|message|>",
}

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
TOOLS = ToolSet.of([WEATHER, TIME])
PARIS = ("get_weather", {"city": "Paris", "days": 2})

# (dialect, text, whether the answer starts inside the thinking, expected (content, reasoning, calls))
CASES = [
    ("hermes", '<think>\nsky\n</think>\n\nSure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", '
               '"days": 2}}\n</tool_call>', False, ("Sure.", "sky", [PARIS])),
    ("hermes", 'no </tool_call> here, a <tool_call>\n{"x": 1}\n</tool_call> that is not a call', False,
     ('no </tool_call> here, a <tool_call>\n{"x": 1}\n</tool_call> that is not a call', None, [])),
    ("hermes", 'thinking, opened by the prompt\n</think>\n\n<tool_call>\n{"name": "get_time", "arguments": '
               '{"note": "</tool_call> in a string"}}\n</tool_call>', True,
     (None, "thinking, opened by the prompt", [("get_time", {"note": "</tool_call> in a string"})])),
    ("qwen3-xml", "I'm\nthinking\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
                  "</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>", True,
     (None, "I'm\nthinking", [PARIS])),
    ("llama3", '{"name": "get_weather", "parameters": {"city": "Paris", "days": 2}}', False, (None, None, [PARIS])),
    ("llama3", '{"city": "Paris"} is JSON but no call', False, ('{"city": "Paris"} is JSON but no call', None, [])),
    ("llama3", '<|python_tag|>{"name": "get_time", "parameters": {}}', False, (None, None, [("get_time", {})])),
    ("mistral", '[THINK]hmm[/THINK]Let me see.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 2}'
                '[TOOL_CALLS]get_time[ARGS]{}', False, ("Let me see.", "hmm", [PARIS, ("get_time", {})])),
    ("deepseek", "<think>a</think>Here.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
                 '{"city": "Paris", "days": 2}<｜tool▁call▁end｜><｜tool▁calls▁end｜>', False, ("Here.", "a", [PARIS])),
    ("glm", "b</think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days"
            "</arg_key><arg_value>2</arg_value></tool_call>", True, (None, "b", [PARIS])),
    ("kimi-k2", 'c</think>Ok. <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0'
                '<|tool_call_argument_begin|>{"city": "Paris", "days": 2}<|tool_call_end|><|tool_calls_section_end|>',
     True, ("Ok. ", "c", [PARIS])),
    ("gemma4", '<|channel>thought\nd<channel|><|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:2}<tool_call|>',
     False, (None, "d", [PARIS])),
    ("harmony", '<|channel|>analysis<|message|>e<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather'
                ' <|constrain|>json<|message|>{"city": "Paris", "days": 2}', False, (None, "e", [PARIS])),
    ("harmony", "<|channel|>analysis<|message|>f<|end|><|start|>assistant<|channel|>final<|message|>Hello.", False,
     ("Hello.", "f", [])),
]


def _shape(result):
    content, reasoning, calls = result
    return content, reasoning, [(c.name, json.loads(c.arguments)) for c in calls]


def _parser(name: str, thinking: bool, forced: str = "") -> AnswerParser:
    return AnswerParser(BY_NAME[name], TOOLS, forced, thinking=thinking)


def _streamed(name: str, pieces: list[str], thinking: bool, cut: bool = False):
    parser = _parser(name, thinking)
    parts = parser.first()
    for piece in pieces:
        parts += parser.feed(piece)
    parts += parser.end(cut)
    content = "".join(p for p in parts if isinstance(p, str))
    reasoning = "".join(p.text for p in parts if isinstance(p, Reasoning))
    return content or None, reasoning or None, [p for p in parts if isinstance(p, ToolCall)]


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_the_dialect_is_found_from_the_templates_text(name):
    assert detect(TEMPLATES[name]).name == name
    assert detect("{% for m in messages %}{{ m.content }}{% endfor %}") is None


def test_every_dialect_has_a_template_excerpt_here():
    assert {d.name for d in DIALECTS} == set(TEMPLATES)


@pytest.mark.parametrize("name, text, thinking, expected", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_whole_answers_give_content_thinking_and_calls(name, text, thinking, expected):
    assert _shape(split_answer(_parser(name, thinking), text)) == expected


@pytest.mark.parametrize("name, text, thinking, expected", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_every_split_of_the_text_gives_what_the_whole_gives(name, text, thinking, expected):
    whole = _shape(split_answer(_parser(name, thinking), text))
    for cut in range(len(text) + 1):  # every split into two pieces
        assert _shape(_streamed(name, [text[:cut], text[cut:]], thinking)) == whole, cut
    step = max(1, len(text) // 24)  # and into three, on a grid (every pair would be slow for long texts)
    for a, b in itertools.combinations(range(0, len(text) + 1, step), 2):
        assert _shape(_streamed(name, [text[:a], text[a:b], text[b:]], thinking)) == whole, (a, b)
    assert _shape(_streamed(name, list(text), thinking)) == whole  # a character at a time


@pytest.mark.parametrize("name", ["hermes", "qwen3-xml", "mistral", "gemma4", "kimi-k2"])
def test_a_call_cut_by_max_tokens_after_a_whole_one_keeps_only_the_whole_one(name):
    text = next(c[1] for c in CASES if c[0] == name and c[3][2])
    opening = BY_NAME[name].forced("get_time")
    first = split_answer(_parser(name, False), text)
    cut = _streamed(name, [text, opening + '{"a'], False, cut=True)
    if BY_NAME[name].regions[0][1] is None:  # a region to the answer's end (Mistral): the same text, cut
        cut = _streamed(name, [text + opening + '{"a'], False, cut=True)
    assert [c.name for c in cut[2]] == [c.name for c in first[2]] and cut[0] == first[0]


@pytest.mark.parametrize("name, rest", [
    ("hermes", '{"city": "Oslo"}}\n</tool_call>'),
    ("qwen3-xml", "<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>"),
    ("llama3", '{"city": "Oslo"}}'),
    ("mistral", '{"city": "Oslo"}'),
    ("glm", "<arg_key>city</arg_key><arg_value>Oslo</arg_value></tool_call>"),
    ("kimi-k2", '{"city": "Oslo"}<|tool_call_end|><|tool_calls_section_end|>'),
    ("deepseek", '{"city": "Oslo"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'),
    ("gemma4", "city:<|\"|>Oslo<|\"|>}<tool_call|>"),
    ("harmony", '{"city": "Oslo"}'),
])
def test_a_named_forced_opening_is_continued_into_that_call(name, rest):
    forced = BY_NAME[name].forced("get_weather")
    parser = AnswerParser(BY_NAME[name], TOOLS, forced)
    assert _shape(split_answer(parser, rest)) == (None, None, [("get_weather", {"city": "Oslo"})])


@pytest.fixture(scope="module")
def vocab(tiny_models):
    from llguidance.llamacpp import lltokenizer_from_vocab

    from specllama.llama.model import GGUFModel

    model = GGUFModel(tiny_models["a"], vocab_only=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        tokenizer = lltokenizer_from_vocab(model._vocab)
    yield model, tokenizer
    model.close()


@pytest.mark.parametrize("dialect, choice, text, ok", [
    ("mistral", "required", 'get_weather[ARGS]{"city": "Paris"}', True),
    ("mistral", "required", 'get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{}', True),
    ("mistral", "required", 'get_wether[ARGS]{"city": "Paris"}', False),
    ("mistral", "auto", 'get_weather[ARGS]{"days": 2}', False),  # after the trigger; city is required
    ("mistral", "auto", 'get_weather[ARGS]{"city": "Rome"}', True),
    ("mistral", {"type": "function", "function": {"name": "get_weather"}}, '{"city": "Oslo"}', True),
    ("llama3", "required", '"get_weather", "parameters": {"city": "Paris"}}', True),
    ("llama3", "required", '"get_time", "parameters": {"city": 3}}', True),  # get_time takes any object
    ("llama3", "required", '"get_weather", "parameters": {"days": 1}}', False),
    ("llama3", {"type": "function", "function": {"name": "get_weather"}}, '{"city": "Oslo"}}', True),
])
def test_dialect_grammars_take_their_calls_and_nothing_else(vocab, dialect, choice, text, ok):
    from llguidance import LLMatcher

    from specllama.decoding.constraint import check_constraint
    from specllama.server.dialect_grammars import call_constraint
    from specllama.server.tools import parse_tools

    model, tokenizer = vocab
    use = parse_tools({"tools": [WEATHER, TIME], "tool_choice": choice})
    constraint = call_constraint(use, BY_NAME[dialect], json.dumps)  # in Qwen's vocabulary the markers are text
    check_constraint(constraint, tokenizer)
    matcher = LLMatcher(tokenizer, LLMatcher.grammar_from_lark(constraint.grammar))
    assert constraint.trigger == ("[TOOL_CALLS]" if choice == "auto" else None)  # the text follows the trigger
    tokens = model.tokenize(text, add_special=False)
    accepted = matcher.validate_tokens(tokens) == len(tokens) and matcher.consume_tokens(tokens) and matcher.is_accepting()
    assert accepted == ok


def test_auto_has_no_grammar_where_no_marker_can_trigger_it():
    from specllama.server.dialect_grammars import call_constraint
    from specllama.server.tools import parse_tools

    use = parse_tools({"tools": [WEATHER], "tool_choice": "auto"})
    assert call_constraint(use, BY_NAME["llama3"], json.dumps) is None  # Llama 3's bare JSON has no marker
    assert call_constraint(use, BY_NAME["qwen3-xml"], json.dumps) is None  # values are text, not JSON


@pytest.mark.parametrize("name", [d.name for d in DIALECTS])
def test_an_only_call_cut_by_max_tokens_is_dropped_with_its_markup(name):
    """Issue 41 (hardening) in every dialect: a forced call the budget cut is neither a call nor
    text in the content (the writers' finish reason says "length"); the dialects branch gave the
    answer's only cut call back as content, markup and all."""
    opening = BY_NAME[name].forced("get_weather")
    for text in (opening, opening + '{"city": "Par'):
        for pieces in ([text], list(text)):
            content, _, calls = _streamed(name, pieces, False, cut=True)
            assert calls == [] and not any(m in (content or "") for m in BY_NAME[name].markers if m), (text, content)


ANSWER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
          "additionalProperties": False}


@pytest.mark.parametrize("dialect, text, ok", [
    ("mistral", '{"city": "Oslo"}', True),  # the response_format's JSON
    ("mistral", '{"town": "Oslo"}', False),
    ("mistral", 'Oslo', False),
    ("mistral", '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}', True),  # or a call, held to its grammar
    ("mistral", '[TOOL_CALLS]get_weather[ARGS]{"days": 2}', False),
    ("qwen3-xml", '{"city": "Oslo"}', True),
    ("qwen3-xml", 'Oslo', False),
    ("qwen3-xml", "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
                  "</tool_call>", True),  # a call: free text after its opening (values are not JSON)
    ("llama3", '<|python_tag|>{"name": "get_time", "parameters": {}}', True),
    ("llama3", '{"city": "Oslo"}', True),
])
def test_auto_tools_keep_the_response_format_in_each_dialect(vocab, dialect, text, ok):
    """The merge of issue 41 (tools keep the response_format for an answer that is not a call) and
    issue 38 (a grammar per dialect): under "auto" the answer is the format's JSON or a call."""
    from llguidance import LLMatcher

    from specllama.decoding.constraint import Constraint, check_constraint
    from specllama.server.dialect_grammars import call_constraint
    from specllama.server.tools import parse_tools

    model, tokenizer = vocab
    use = parse_tools({"tools": [WEATHER, TIME], "tool_choice": "auto"})
    answer = Constraint(kind="json_schema", schema=ANSWER, strict=True)
    def token(text: str) -> str:  # as serve names a marker (exchange.SessionTemplate.grammar_token)
        ids = model.tokenize(text, add_special=False)
        return f"<[{ids[0]}]>" if len(ids) == 1 and model.detokenize(ids) == text else json.dumps(text)

    constraint = call_constraint(use, BY_NAME[dialect], token, answer=answer)
    check_constraint(constraint, tokenizer)
    assert constraint.trigger is None  # from the first token
    matcher = LLMatcher(tokenizer, LLMatcher.grammar_from_lark(constraint.grammar))
    tokens = model.tokenize(text, add_special=False)
    accepted = matcher.validate_tokens(tokens) == len(tokens) and matcher.consume_tokens(tokens) and matcher.is_accepting()
    assert accepted == ok


def test_a_forced_call_or_no_parsing_ignores_or_keeps_the_response_format():
    from specllama.decoding.constraint import Constraint
    from specllama.server.dialect_grammars import call_constraint
    from specllama.server.tools import parse_tools

    answer = Constraint(kind="json_schema", schema=ANSWER, strict=True)
    none = parse_tools({"tools": [WEATHER], "tool_choice": "none"})
    assert call_constraint(none, BY_NAME["mistral"], json.dumps, answer=answer) is answer
    forced = parse_tools({"tools": [WEATHER], "tool_choice": "required"})
    assert "answer" not in call_constraint(forced, BY_NAME["mistral"], json.dumps, answer=answer).grammar
    assert call_constraint(parse_tools({"tools": [WEATHER]}), BY_NAME["harmony"], json.dumps, answer=answer) is None
