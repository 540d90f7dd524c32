"""`batch --parallel auto` says how many prompts it starts with and on what costs, and that it
chooses again as the run's steps show their costs (exact mode's limits included)."""

from __future__ import annotations

import re

import pytest

from specllama.cli.main import main
from tests.support.tiny_gguf import write_tiny_model


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
    # One slot per prompt (three, not the sixteen auto considers), and what each costs in memory.
    assert "prompt(s) per decode to start (--parallel auto: 3 slot(s), one per prompt, " in err
    assert re.search(r"\d+ kB of cache each; on ", err)
    assert "chosen again as this run's steps show their costs" in err
    assert ("exact mode: at most" in err) is exact
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 3


@pytest.mark.parametrize("options, noted", [
    (["--parallel", "auto"], True),
    (["--parallel", "2"], True),
    (["--parallel", "1"], False),  # one prompt at a time: the text is --parallel 1's
    (["--parallel", "auto", "--exact"], False),  # rows independent of the batch
    (["--parallel", "auto", "--temp", "0.7", "--seed", "1"], False),  # sampled text depends on the seed anyway
])
def test_batch_says_once_when_greedy_text_can_differ_from_one_at_a_time(wide_heads, tmp_path, capsys, options, noted):
    prompts = tmp_path / "p.txt"
    prompts.write_text("one\ntwo\nthree\n")
    argv = ["batch", str(prompts), "-o", str(tmp_path / "out.jsonl"), "--target", str(wide_heads), "--no-draft",
            "--max-tokens", "2", "--ctx", "256", *options]
    assert main(argv) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "can differ from --parallel 1" in line]
    assert len(notes) == (1 if noted else 0)
    if noted:
        assert "--exact gives the same text at any --parallel" in notes[0]


def test_bench_parallel_says_when_greedy_text_can_differ(wide_heads, tmp_path, capsys):
    prompts = tmp_path / "p.txt"
    prompts.write_text("one\ntwo\n")
    argv = ["bench", "--prompts", str(prompts), "--parallel", "1,2", "--target", str(wide_heads), "-n", "2",
            "--ctx", "256"]
    assert main(argv) == 0
    assert "so greedy text can differ from --parallel 1" in capsys.readouterr().err
