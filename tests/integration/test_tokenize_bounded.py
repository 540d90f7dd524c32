"""Tokenizing costs time linear in the text, whatever it holds, and gives llama.cpp's own tokens.

llama.cpp's special-token split searches to the end of the whole text once per fragment, so a chat
message of repeated `<|im_end|>x` cost the square of its size (220 KB: 1.2 s, 440 KB: 5 s, a
7.6 MB server body never finished). specllama/llama/special_text.py finds the special tokens in
one pass and GGUFModel.tokenize hands llama.cpp the text in pieces cut before them. These tests
load the tiny models (real Qwen2.5 and SmolLM2 vocabularies) and compare with llama.cpp tokenizing
the whole text, and with the old two-tokenization control-text check.
"""

from __future__ import annotations

import random
import threading

import pytest

from specllama.errors import ContextOverflowError, Stopped
from specllama.llama import model as model_module
from specllama.llama.model import GGUFModel
from specllama.llama.special_text import SpecialTexts, overlapping, split_at, trie_regex

WORDS = ["hello", " world", "\n", "\n\n", "  ", "\t", "é", "漢字", "🙂", "x", "<", "|", ">", "im_end", "123", " ", "<|",
         "|>", "tool", "_call", "</", "'s", "\r\n", "a" * 40]


@pytest.fixture(scope="module")
def models(tiny_models):
    loaded = {name: GGUFModel(tiny_models[name]) for name in ("a", "other")}
    yield loaded
    for m in loaded.values():
        m.close()


def random_text(rng: random.Random, specials: list[str], n: int) -> str:
    return "".join(rng.choice(specials) if rng.random() < 0.2 else rng.choice(WORDS) for _ in range(n))


@pytest.mark.parametrize("name", ["a", "other"])
def test_pieces_tokenize_to_what_llama_cpp_gives_for_the_whole_text(models, name, monkeypatch):
    model = models[name]
    specials = sorted(model.special_texts.control | model.special_texts.user_defined)
    assert model.special_texts.overlap_free
    monkeypatch.setattr(model_module, "SPLIT_WORK", 0)  # cut every text that holds a special token
    monkeypatch.setattr(model_module, "SPLIT_FROM_BYTES", 0)
    rng = random.Random(7)
    cut = 0
    for i in range(300):
        text = random_text(rng, specials, rng.randint(1, 60))
        for parse_special in (True, False):
            whole = model._tokenize_bytes(text.encode(), False, parse_special)
            assert model.tokenize(text, add_special=False, parse_special=parse_special) == whole, (text, parse_special)
            cut += model._pieces(text, len(text.encode()), parse_special, None) is not None
        whole = model._tokenize_bytes(text.encode(), True, True)
        assert model.tokenize(text) == whole, text
    assert cut > 200  # most texts really went in pieces (SmolLM2 has no user-defined tokens)


@pytest.mark.parametrize("name", ["a", "other"])
def test_the_control_text_search_agrees_with_tokenizing_both_ways(models, name):
    model = models[name]
    specials = sorted(model.special_texts.control | model.special_texts.user_defined)
    rng = random.Random(3)
    found = 0
    for _ in range(300):
        text = random_text(rng, specials, rng.randint(1, 30))
        both_ways = (model._tokenize_bytes(text.encode(), False, True) != model._tokenize_bytes(text.encode(), False, False))
        assert model._holds_control_text(text) == both_ways, text
        found += both_ways
    assert 50 < found < 300


def test_control_text_in_a_message_stays_text_however_long(models):
    """The S1 body of issue 33 at 2 MB: llama.cpp alone took minutes over it; now well under a
    second (the deadline is 30x that, so it proves the square is gone, not a speed)."""
    model = models["a"]
    content = "<|im_end|>x" * 200_000
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("tokens", model.chat_tokens(
        [{"role": "user", "content": content}])), daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "tokenizing 2.2 MB of <|im_end|>x took more than 30 s"
    tokens = result["tokens"]
    im_end = model.tokenize("<|im_end|>", add_special=False)[0]
    plain = model.chat_tokens([{"role": "user", "content": "x"}])
    assert tokens.count(im_end) == plain.count(im_end)  # the user's markers are text, not control tokens
    assert model.detokenize(tokens, special=True).count("<|im_end|>x") == 200_000


def test_more_special_tokens_than_the_context_holds_are_refused_before_tokenizing(models, monkeypatch):
    """A raw prompt (/v1/completions) whose special tokens alone overflow the context."""
    model = models["a"]
    calls = []
    real = model._tokenize_bytes
    monkeypatch.setattr(model, "_tokenize_bytes", lambda *a: calls.append(a) or real(*a))
    with pytest.raises(ContextOverflowError, match="special-token texts"):
        model.tokenize("<|im_end|>x" * 5000, max_tokens=4096)
    assert calls == []


def test_stop_abandons_tokenizing_between_pieces(models):
    model = models["a"]
    asked = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) > 3

    with pytest.raises(Stopped):
        model.tokenize("<tool_call>" + "x " * 2000 + "<tool_call>y" * 3000, stop=stop)
    assert len(asked) == 4


def test_trie_regex_takes_the_longest_text_at_the_leftmost_place():
    pattern = trie_regex(["<a>", "<ab>", "<abc>", "b"])
    assert [m.group() for m in pattern.finditer("x<abc>y<ab><a>b<abd>")] == ["<abc>", "<ab>", "<a>", "b", "b"]
    assert trie_regex([]) is None


def test_overlap_and_lstrip():
    assert not overlapping({"<|im_end|>", "<|im_start|>", "<tool_call>", "</tool_call>"})
    assert overlapping({"ab", "bc"}) and overlapping({"aa"})
    specials = SpecialTexts([("<m>", (1 << 3) | (1 << 7)), ("<u>", 1 << 4), ("plain", 1 << 2)])
    assert specials.starts("x  <m>y<u>", parse_special=True) == [1, 7]  # the spaces go with the LSTRIP token
    assert specials.starts("x  <m>y<u>", parse_special=False) == [7]
    assert split_at("x  <m>y<u>", [1, 7]) == ["x", "  <m>y", "<u>"]
    assert specials.holds_control("a<m>") and not specials.holds_control("a<u>plain")
