"""`specllama run` with a thinking model (the tiny Qwen3-style toy of test_serve_thinking.py, whose
prompt opens the thinking: all it writes is thinking): the thinking stays off stdout, goes to
stderr only with --show-thinking, and --stats / --json count its tokens apart."""

from __future__ import annotations

import json

import pytest

from specllama.cli.main import main
from tests.support.templates import QWEN3_STYLE
from tests.support.tiny_gguf import write_tiny_model


@pytest.fixture(scope="module")
def thinker(tokenizer_sources, tmp_path_factory):
    return write_tiny_model(tmp_path_factory.mktemp("thinker") / "thinker.gguf", tokenizer_sources["qwen"], seed=3,
                            chat_template=QWEN3_STYLE)


def _run(thinker, capsys, *argv):
    assert main(["run", "-m", str(thinker), "--no-draft", "-n", "8", "-c", "256", "--temp", "0", *argv, "hi"]) == 0
    return capsys.readouterr()


def test_thinking_is_on_stderr_only_when_asked(thinker, capsys):
    quiet = _run(thinker, capsys)
    shown = _run(thinker, capsys, "--show-thinking")
    assert quiet.out.strip() == "" and shown.out.strip() == ""  # the answer never left its thinking
    assert "thinking: " not in quiet.err
    thought = shown.err.split("thinking: ", 1)[1].strip()
    assert thought and thought in json.loads(_run(thinker, capsys, "--json").out)["thinking"]


def test_stats_and_json_count_thinking_tokens_apart(thinker, capsys):
    assert "thinking: 8 of the 8 tokens" in _run(thinker, capsys, "--stats").err
    doc = json.loads(_run(thinker, capsys, "--json").out)
    assert doc["text"] == "" and doc["thinking_tokens"] == doc["tokens"] == 8 and doc["thinking"]


def test_a_model_that_does_not_think_is_untouched(tiny_models, capsys):
    doc = json.loads(_run(tiny_models["a"], capsys, "--json").out)
    assert doc["text"] and "thinking" not in doc
