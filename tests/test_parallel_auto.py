"""`batch --parallel auto` says how many prompts it starts with and on what costs, and that it
chooses again as the run's steps show their costs (exact mode's limits included)."""

from __future__ import annotations

import pytest

from specllama.cli.main import main
from tests.tiny_gguf import write_tiny_model


@pytest.fixture(scope="module")
def wide_heads(tmp_path_factory, tokenizer_sources):
    """A tiny model whose head size (32) exact mode's Q8_0 cache can hold."""
    return write_tiny_model(tmp_path_factory.mktemp("wide") / "w.gguf", tokenizer_sources["qwen"], n_embd=64, n_head=2,
                            n_head_kv=1)


@pytest.mark.parametrize("exact", [False, True])
def test_parallel_auto_says_what_it_chose_and_why(wide_heads, tmp_path, capsys, exact):
    prompts = tmp_path / "p.txt"
    prompts.write_text("one\ntwo\nthree\n")
    argv = ["batch", str(prompts), "-o", str(tmp_path / "out.jsonl"), "--target", str(wide_heads),
            "--no-draft", "--parallel", "auto", "--max-tokens", "2", "--ctx", "256"] + (["--exact"] if exact else [])
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "prompt(s) per decode to start (--parallel auto, on " in err
    assert "chosen again as this run's steps show their costs" in err
    assert ("exact mode: at most" in err) is exact
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 3
