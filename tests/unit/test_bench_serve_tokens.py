"""scripts/measure/bench_serve.py counts an answer's tokens alike for every server: llama-server's
completion_tokens include the end-of-generation token it stopped on (an identical answer: ours 219, its
220, the text re-tokenized 219), specllama's do not; without the correction its per-token figures and
tokens/s were ~0.5 % in its favour."""

from __future__ import annotations

import pytest

from tests.support.measure_scripts import fresh_script


@pytest.fixture
def bench_serve(monkeypatch):
    yield from fresh_script(monkeypatch, "bench_serve")


def test_llama_servers_end_token_is_not_counted_as_answer(bench_serve):
    assert bench_serve.answer_tokens("llama-server", 220, "stop") == 219
    assert bench_serve.answer_tokens("llama-server-spec", 353, "stop") == 352


def test_other_answers_keep_their_count(bench_serve):
    assert bench_serve.answer_tokens("llama-server", 600, "length") == 600  # cut at max_tokens: no end token
    assert bench_serve.answer_tokens("auto", 219, "stop") == 219
    assert bench_serve.answer_tokens("none", 219, "stop") == 219
