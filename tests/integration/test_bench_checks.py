"""The benchmark's checks: outputs checked before it runs and never over its prompts, configuration
labels that mean what the command line means, every verdict with its evidence, exact mode said."""

from __future__ import annotations

import json

import pytest

from specllama.cli.main import build_parser, main
from tests.support.one_line import NEVER, one_error_line


@pytest.mark.parametrize("flag", ["--json", "--markdown"])
@pytest.mark.parametrize("where, fragment", [("missing/r.out", "does not exist"), ("adir", "is a directory")])
def test_bench_outputs_are_checked_before_the_benchmark(tmp_path, capsys, flag, where, fragment):
    (tmp_path / "adir").mkdir()
    prompts = tmp_path / "p.txt"
    prompts.write_text("hello\n")
    code = main(["bench", "--prompts", str(prompts), "--configs", "none", flag, str(tmp_path / where),
                 "--target", str(tmp_path / "never-loaded.gguf")])
    assert code == 1
    one_error_line(capsys.readouterr().err, flag, fragment)


def test_a_repeated_key_in_a_bench_config_is_refused():
    from specllama.bench.configs import BenchConfigError, parse_configs

    with pytest.raises(BenchConfigError, match="k is given more than once"):
        parse_configs("model:k=2,k=3")
    with pytest.raises(BenchConfigError, match="p_min is given more than once"):
        parse_configs("model:p-min=0.1,p_min=0.2")


@pytest.mark.parametrize("flags", [["--json", "{p}"], ["--markdown", "{p}"], ["--json", "{o}", "--markdown", "{o}"],
                                   ["--json", "{link}"]])
def test_bench_refuses_outputs_that_are_its_prompts_or_each_other(tmp_path, capsys, flags):
    prompts = tmp_path / "p.txt"
    prompts.write_text("hello\n")
    (tmp_path / "link.txt").symlink_to(prompts)
    names = {"p": str(prompts), "o": str(tmp_path / "out"), "link": str(tmp_path / "link.txt")}
    argv = ["bench", "--prompts", str(prompts), "--configs", "none", "--target", str(tmp_path / NEVER)]
    assert main(argv + [f.format(**names) for f in flags]) == 2
    err = capsys.readouterr().err
    one_error_line(err)
    assert NEVER not in err  # refused before any model is looked for
    assert prompts.read_text() == "hello\n"


def test_a_bench_configs_defaults_are_the_command_lines():
    from specllama.bench.configs import parse_config

    cli_k = build_parser().parse_args(["run", "x"]).k
    for drafter in ("auto", "suffix", "model"):
        config = parse_config(drafter)
        assert config.k == cli_k == "auto" and config.label == f"{drafter}:k=auto"


class _FixedGap:
    """A stand-in session for the benchmark's judge: after any tokens the target's top-2 gap is `gap`."""

    def __init__(self, gap: float):
        self.gap = gap

    def judge(self, prompt, reference, candidate):
        from specllama.decoding.exactness import compare_greedy

        return compare_greedy(self, prompt, reference, candidate)  # it decodes in this stand-in context

    def clear(self) -> None:
        pass

    def decode(self, tokens, logits="last"):
        import numpy as np

        return np.array([[0.0, 5.0, 5.0 + self.gap]])

    def top2_gap(self, tokens) -> float:
        return self.gap

    def detokenize(self, ids) -> str:
        return "".join(f"<{i}>" for i in ids)


def _run(label: str, ids: list[int], finish: str):
    from types import SimpleNamespace

    from specllama.bench.configs import parse_config
    from specllama.bench.runner import RunRecord

    return RunRecord(parse_config(label), "p1", 0, SimpleNamespace(finish_reason=finish), ids)


@pytest.mark.parametrize("finish, gap, verdict", [("stop", 2.0, "different"), ("stop", 0.1, "near_tie")])
def test_a_run_that_ends_where_plain_decoding_goes_on_is_judged_by_its_gap(finish, gap, verdict):
    from specllama.bench.pairing import comparison_dict, explain, judge_runs

    runs = [_run("none", [1, 2, 3, 4], "length"), _run("model:k=4", [1, 2], finish)]
    judged = judge_runs(_FixedGap(gap), {"p1": [9, 9]}, runs)
    entry = comparison_dict(judged[1])
    assert entry["status"] == verdict and entry["position"] == 2 and entry["gap"] == pytest.approx(gap)
    assert entry["none_text"] == "<3><4>" and entry["text"] == "" and entry["common_text"] == "<1><2>"
    line = explain("model:k=4", "p1", entry)
    assert "token 2" in line and f"{gap:.3f}" in line and "'<3><4>'" in line


def test_a_difference_without_a_gap_says_why():
    from specllama.bench.pairing import comparison_dict, explain, judge_runs

    runs = [_run("none", [1, 2, 3, 4], "length"), _run("model:k=4", [1, 2], "context")]
    entry = comparison_dict(judge_runs(_FixedGap(3.0), {"p1": [9]}, runs)[1])
    assert entry["status"] == "different" and entry["gap"] is None
    assert "model:k=4 stopped after 2 tokens (context)" in entry["why_no_gap"]
    assert entry["why_no_gap"] in explain("model:k=4", "p1", entry)


def test_bench_in_exact_mode_says_what_its_identity_check_compares_with(tokenizer_sources, tmp_path, capsys,
                                                                         monkeypatch):
    from tests.support.tiny_gguf import write_tiny_model

    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path / "cache"))
    model = write_tiny_model(tmp_path / "m.gguf", tokenizer_sources["qwen"], n_head=2, n_head_kv=1)  # Q8_0 needs heads of 32
    prompts = tmp_path / "p.txt"
    prompts.write_text("Write a haiku about caches.\n")
    out_json = tmp_path / "bench.json"
    code = main(["bench", "--prompts", str(prompts), "--target", str(model), "--ctx", "256",
                 "--max-tokens", "4", "--configs", "none;suffix:k=2", "--exact", "--json", str(out_json)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "exact mode (Q8_0 KV cache" in out and "plain decoding in exact mode" in out
    assert json.loads(out_json.read_text())["settings"]["decoding"].startswith("exact mode (Q8_0 KV cache")
