"""Grammar-constrained generation on real (tiny, generated) GGUF models: the engine's masked greedy
is the argmax among allowed tokens, step by step; speculation with forced and suffix drafts gives
plain constrained decoding's text in exact mode; every answer parses and validates over many
schemas, greedy and sampled; drafts are cut at a forbidden token; the matcher's state moves only
with emitted tokens; a lazy trigger constrains only what follows it.

The tiny models' weights are random, so each schema bounds its strings, numbers and arrays: an
unbounded integer under a random model runs to max_tokens, and that would test max_tokens."""

from __future__ import annotations

import json
import re

import jsonschema
import numpy as np
import pytest
from llguidance import LLMatcher

from specllama.decoding.constraint import Constraint, grammar_text, lark_json
from specllama.decoding.drafters import Proposal
from specllama.decoding.engine import Engine, GenerationConfig, TokenEvent
from specllama.decoding.grammar import GRAMMAR, Guide, grammar_tokenizer
from specllama.decoding.sampling import SamplingParams
from specllama.decoding.suffix_drafter import SuffixDrafter
from specllama.llama.context import DecodeContext
from specllama.llama.model import GGUFModel
from specllama.llama.quantize import quantize
from tests.support.tiny_gguf import write_tiny_model

SCHEMAS = [
    {"type": "object", "additionalProperties": False, "required": ["name", "age"],
     "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer", "minimum": 0, "maximum": 120}}},
    {"type": "array", "minItems": 1, "maxItems": 3, "items": {"enum": ["red", "green", "blue"]}},
    {"type": "object", "additionalProperties": False, "required": ["ok", "level"],
     "properties": {"ok": {"type": "boolean"}, "level": {"enum": ["low", "mid", "high"]},
                    "note": {"type": ["string", "null"], "maxLength": 6}}},
    {"type": "object", "additionalProperties": False, "required": ["point"],
     "properties": {"point": {"type": "object", "additionalProperties": False, "required": ["x", "y"],
                              "properties": {"x": {"type": "integer", "minimum": -5, "maximum": 5},
                                             "y": {"type": "integer", "minimum": 0, "maximum": 9}}}}},
    {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 999}, {"type": "string", "pattern": "^[a-z]{1,4}$"}]},
    {"type": "object", "additionalProperties": False, "required": ["items"], "$defs": {
        "item": {"type": "object", "additionalProperties": False, "required": ["id"],
                 "properties": {"id": {"type": "integer", "minimum": 1, "maximum": 50}}}},
     "properties": {"items": {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/item"}}}},
    {"type": "string", "format": "date"},
    {"type": "object", "additionalProperties": False, "required": ["code"],
     "properties": {"code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"}, "const": {"const": "v1"}}},
]


@pytest.fixture(scope="module")
def exact_model(tmp_path_factory, tokenizer_sources):
    """A tiny Q8_0 model: exact mode keeps its full verify batch (test_exact_rows.py), so greedy
    speculation must give plain decoding's tokens bit for bit."""
    out = tmp_path_factory.mktemp("grammar_tiny")
    f16 = write_tiny_model(out / "f16.gguf", tokenizer_sources["qwen"], n_embd=128, n_ff=256, seed=3)
    q8 = out / "q8_0.gguf"
    quantize(f16, q8, "Q8_0", pure=True)
    return GGUFModel(q8, exact=True)


@pytest.fixture(scope="module")
def engine(exact_model):
    return Engine(DecodeContext(exact_model, n_ctx=1024, n_threads=1, exact=True), {"suffix": SuffixDrafter()})


def _run(engine, prompt: str, constraint: Constraint, **config) -> tuple[list[TokenEvent], object]:
    engine.reset()
    tokens = engine.target.model.tokenize(prompt)
    config.setdefault("max_tokens", 120)
    return engine.generate(tokens, GenerationConfig(constraint=constraint, **config)).tokens()


def test_masked_greedy_is_the_argmax_among_allowed_tokens(exact_model, engine):
    constraint = Constraint("json_schema", schema=SCHEMAS[0])
    events, summary = _run(engine, "Person:", constraint, drafter="none")
    # The reference: decode one token at a time; a fresh matcher says which tokens are allowed.
    ctx = DecodeContext(exact_model, n_ctx=1024, n_threads=1, exact=True)
    matcher = LLMatcher(grammar_tokenizer(exact_model), grammar_text(constraint), log_level=0)
    prompt = exact_model.tokenize("Person:")
    row = ctx.decode(prompt)[-1]
    expected, masked_away = [], 0
    while not matcher.is_stopped() and len(expected) < 120:
        allowed = np.unpackbits(np.frombuffer(matcher.compute_bitmask(), np.uint8), bitorder="little")[:len(row)]
        choice = int(np.argmax(np.where(allowed.astype(bool), row, -np.inf)))
        masked_away += choice != int(np.argmax(row))
        if exact_model.is_eog(choice):
            break
        assert matcher.consume_token(choice)
        expected.append(choice)
        row = ctx.decode([choice])[-1]
    assert [e.id for e in events] == expected and summary.finish_reason == "stop"
    assert masked_away > 0  # the random model's own choice was refused: the mask did the work
    jsonschema.validate(json.loads(summary.text), SCHEMAS[0])


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_speculation_gives_plain_constrained_decodings_text_and_it_validates(engine, index):
    constraint = Constraint("json_schema", schema=SCHEMAS[index])
    plain, plain_summary = _run(engine, "JSON:", constraint, drafter="none")
    spec, summary = _run(engine, "JSON:", constraint, drafter="suffix")
    assert [e.id for e in spec] == [e.id for e in plain]
    assert summary.finish_reason == plain_summary.finish_reason == "stop"
    jsonschema.validate(json.loads(summary.text), SCHEMAS[index])
    assert plain_summary.drafted_by == {}  # plain decoding proposes nothing, not even forced tokens
    grammar = [e for e in spec if e.source == GRAMMAR]
    assert grammar and summary.accepted_by[GRAMMAR] == len(grammar) <= summary.drafted_by[GRAMMAR]
    assert summary.steps <= plain_summary.steps  # forced tokens ride in the steps for free


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
@pytest.mark.parametrize("drafter", ["none", "suffix"])
def test_sampled_answers_validate(engine, index, drafter):
    for seed in range(3):
        _, summary = _run(engine, "Data:", Constraint("json_schema", schema=SCHEMAS[index]), drafter=drafter,
                          sampling=SamplingParams(temperature=1.0, seed=seed))
        assert summary.finish_reason == "stop"
        jsonschema.validate(json.loads(summary.text), SCHEMAS[index])


def test_lark_and_regex_constraints(engine):
    _, summary = _run(engine, "Answer:", Constraint("regex", grammar=r"(yes|no)! [0-9]{2}"), drafter="suffix")
    assert summary.finish_reason == "stop" and re.fullmatch(r"(yes|no)! [0-9]{2}", summary.text)
    args = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 9, "minimum": 0}},
            "required": ["n"], "additionalProperties": False}
    lark = f'start: "call(" %json{lark_json(args)} ")"'
    _, summary = _run(engine, "Call:", Constraint("lark", grammar=lark), drafter="suffix")
    assert summary.finish_reason == "stop" and summary.text.startswith("call(") and summary.text.endswith(")")
    assert 0 <= json.loads(summary.text[5:-1])["n"] <= 9


def _guide(model, constraint: Constraint) -> Guide:
    return Guide(constraint, grammar_tokenizer(model), model.n_vocab, lambda t: model.piece(t, special=True))


def test_a_draft_is_cut_at_its_first_forbidden_token_and_forced_tokens_follow(exact_model):
    guide = _guide(exact_model, Constraint("json_schema", schema={
        "type": "object", "required": ["color"], "additionalProperties": False,
        "properties": {"color": {"enum": ["red", "green"]}}}))
    tok = lambda s: exact_model.tokenize(s, add_special=False)  # noqa: E731
    proposal = Proposal(tok('{"colour'), confidence=[0.9] * len(tok('{"colour')), source="suffix")
    proposal = guide.shape(proposal, room=16)
    text = exact_model.detokenize(proposal.tokens)
    assert text.startswith('{"colo') and "colour" not in text  # cut before the forbidden 'u'
    # ... then the grammar's forced rest of the key (llguidance stops before ' "', which the next
    # bytes could merge into another token)
    assert text == '{"color":'
    n_suffix = proposal.sources.count("suffix")
    assert list(proposal.sources) == ["suffix"] * n_suffix + [GRAMMAR] * (len(proposal.tokens) - n_suffix)
    assert proposal.confidence[n_suffix:] == (1.0,) * (len(proposal.tokens) - n_suffix)
    # Nothing was consumed: the same draft shapes the same way again, and an empty draft gets the
    # forced opening from the start.
    again = Proposal(tok('{"colour'), source="suffix")
    again = guide.shape(again, room=16)
    assert again.tokens == proposal.tokens
    empty = Proposal([])
    empty = guide.shape(empty, room=16)
    assert exact_model.detokenize(empty.tokens) == '{"color":' and empty.source == GRAMMAR
    limited = Proposal([])
    limited = guide.shape(limited, room=2)
    assert limited.tokens == empty.tokens[:2]


def test_the_mask_leaves_the_matcher_where_it_was(exact_model):
    guide = _guide(exact_model, Constraint("regex", grammar="[0-9]+;"))
    digits = exact_model.tokenize("12", add_special=False)
    rows = np.zeros((len(digits) + 1, exact_model.n_vocab), dtype=np.float32)
    rows[:, exact_model.tokenize("a", add_special=False)[0]] = 5.0  # the target prefers a forbidden token
    masked = guide.mask(digits, rows, greedy=False)
    semicolon = exact_model.tokenize(";", add_special=False)[0]
    assert np.isneginf(masked[0, semicolon]) and np.isfinite(masked[1, semicolon])  # ';' needs a digit first
    assert not np.isfinite(masked[:, exact_model.tokenize("a", add_special=False)[0]]).any()
    assert guide.matcher.validate_tokens([semicolon]) == 0  # still at the start
    greedy = guide.mask(digits, rows, greedy=True)
    assert int(np.argmax(greedy[0])) != exact_model.tokenize("a", add_special=False)[0]
    guide.advance(digits[0])
    assert guide.matcher.validate_tokens([semicolon]) == 1 and not guide.complete
    guide.advance(semicolon)
    assert guide.complete


def test_a_draft_that_completes_the_grammar_and_ends_leaves_the_matcher_where_it_was(exact_model):
    """A draft that closes the JSON and then ends (`"b"]}` + the end of generation), judged and turned away
    at its first token: the mask consumed and rolled back its tokens, and the matcher must be where it was,
    so the target's own different token still fits (it failed once, when the end was consumed on a
    stopped matcher and the rollback went one token too far)."""
    guide = _guide(exact_model, Constraint("json_schema", schema={
        "type": "object", "required": ["a"], "additionalProperties": False,
        "properties": {"a": {"type": "array", "items": {"type": "string"}}}}))
    tok = lambda s: exact_model.tokenize(s, add_special=False)  # noqa: E731
    for token in tok('{"a": ["x", "'):
        guide.advance(token)
    end, other = exact_model.eog_ids[0], tok("Java")
    draft = [*tok('b"]}'), end]
    assert guide.shape(Proposal(draft, source="suffix"), room=16).tokens == tuple(draft)  # all of it allowed
    assert guide.matcher.validate_tokens(other) == len(other)  # shape consumed and rolled back its tokens
    rows = np.zeros((len(draft) + 1, exact_model.n_vocab), dtype=np.float32)
    guide.mask(draft, rows, greedy=False)
    assert guide.matcher.validate_tokens(other) == len(other)  # and so did the mask
    for token in [*other, *tok('"]}')]:
        guide.advance(token)
    assert guide.complete


def test_a_lazy_trigger_constrains_only_what_follows_it(exact_model, engine):
    trigger = "<tool_call>"
    guide = _guide(exact_model, Constraint("regex", grammar="[0-9]{3}", trigger=trigger))
    free = exact_model.tokenize("hello ", add_special=False)
    rows = np.zeros((len(free) + 1, exact_model.n_vocab), dtype=np.float32)
    assert guide.mask(free, rows, greedy=False) is rows  # nothing constrained before the trigger
    call = exact_model.tokenize(trigger, add_special=True)[-1:]  # Qwen's <tool_call> is one special token
    assert exact_model.detokenize(call, special=True) == trigger
    draft = free + call + exact_model.tokenize("12x", add_special=False)
    proposal = Proposal(list(draft), source="suffix")
    proposal = guide.shape(proposal, room=16)
    assert exact_model.detokenize(proposal.tokens, special=True) == "hello <tool_call>12"  # the 'x' is cut
    masked = guide.mask(draft[:len(free) + 1], np.zeros((len(free) + 2, exact_model.n_vocab), np.float32), greedy=False)
    assert np.isfinite(masked[:len(free) + 1]).all() and np.isneginf(masked[len(free) + 1]).sum() > 0
    for token in free + call:
        guide.advance(token)
    assert guide.active and not guide.complete
    # Through the engine: the prompt's text is free, and generation ends when the grammar does.
    _, summary = _run(engine, "Say <tool_call>", Constraint("regex", grammar="[0-9]{3}", trigger=trigger),
                      drafter="suffix", max_tokens=40)
    assert summary.finish_reason in ("stop", "length")
    if trigger in summary.text:
        after = summary.text.split(trigger, 1)[1]
        assert after.isdigit() and len(after) == 3 and summary.finish_reason == "stop"


def test_sampling_with_drafts_follows_the_constrained_distribution(engine):
    """Drafts (suffix, forced) change how tokens are proposed, never what is sampled: the answers'
    distribution with them is plain masked sampling's (total variation within sampling noise)."""
    constraint = Constraint("regex", grammar=" [ab]{3}!!!!")
    prompt = "aab!!!! bab!!!! aab!!!! abb!!!! aab!!!!"
    counts: dict[str, dict[str, int]] = {"none": {}, "suffix": {}}
    drafted: dict[str, int] = {}
    runs = 300
    for drafter in counts:
        for seed in range(runs):
            _, summary = _run(engine, prompt, constraint, drafter=drafter, k=4 if drafter == "suffix" else "auto", max_tokens=16,
                              sampling=SamplingParams(temperature=1.0, seed=seed))
            assert re.fullmatch(" [ab]{3}!!!!", summary.text) and summary.finish_reason == "stop"
            counts[drafter][summary.text] = counts[drafter].get(summary.text, 0) + 1
            for source, n in summary.drafted_by.items():
                drafted[source] = drafted.get(source, 0) + n
    assert drafted.get("suffix", 0) > runs and drafted.get(GRAMMAR, 0) > runs // 2  # both kinds of drafts were judged
    answers = set(counts["none"]) | set(counts["suffix"])
    assert len(answers) >= 4  # a spread to compare, not one near-certain answer
    distance = sum(abs(counts["none"].get(a, 0) - counts["suffix"].get(a, 0)) for a in answers) / (2 * runs)
    # Two samples of 300 from one distribution over 8 answers: TV is about 0.06 typically, rarely
    # above 0.12; a sampler that kept drafted tokens regardless would favour the prompt's answers.
    assert distance < 0.15, (distance, counts)


def test_a_checked_grammar_is_not_compiled_again_on_the_engine_thread(exact_model, engine, monkeypatch):
    """Issue 41: the engine compiled each request's grammar again when it admitted it, between
    steps, so a large grammar stalled every other stream (~0.75 s). check() (a server's preparing
    thread) compiles and probes it once; admitting the request copies that matcher."""
    import threading

    from specllama.decoding import grammar as grammar_module
    from specllama.decoding.engine import Request

    schema = {"type": "object", "additionalProperties": False, "required": ["k"],
              "properties": {"k": {"enum": [f"value-{i}" for i in range(300)]}}}
    constraint = Constraint("json_schema", schema=schema)
    tokens = exact_model.tokenize("JSON:")
    checker = threading.Thread(target=engine.check, args=(Request(tokens, GenerationConfig(constraint=constraint)),))
    checker.start()
    checker.join()
    compiled = []
    real = grammar_module.check_constraint
    monkeypatch.setattr(grammar_module, "check_constraint", lambda *a, **k: compiled.append(1) or real(*a, **k))
    engine.reset()
    _, summary = engine.generate(tokens, GenerationConfig(constraint=constraint, max_tokens=40)).tokens()
    assert compiled == [] and json.loads(summary.text)["k"].startswith("value-")
