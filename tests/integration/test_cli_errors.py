"""User mistakes: one clear line on stderr, a non-zero exit, never a traceback."""

from __future__ import annotations

import subprocess
import sys

from specllama.cli.main import main
from tests.support.tiny_gguf import write_not_gguf, write_truncated_copy


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, *fragments, usage=False):
    """One error line; a usage mistake (exit 2) shows the command's usage before it, as argparse does."""
    assert code == (2 if usage else 1), err
    lines = err.strip().splitlines()
    if usage:
        assert lines[0].startswith("usage: specllama "), err
        lines = lines[-1:]
    assert len(lines) == 1 and lines[0].startswith("specllama: error: "), err
    for fragment in fragments:
        assert fragment in lines[0]


def test_missing_model_file(capsys, tmp_path):
    code, _, err = run_cli(capsys, "run", "hi", "--target", str(tmp_path / "gone.gguf"), "--no-draft")
    assert_one_line_error(code, err, "gone.gguf")


def test_not_a_gguf_file(capsys, tmp_path):
    code, _, err = run_cli(capsys, "models", "info", str(write_not_gguf(tmp_path / "readme.gguf")))
    assert_one_line_error(code, err, "not a GGUF file")


def test_truncated_model(capsys, tmp_path, tiny_models):
    half = write_truncated_copy(tiny_models["a"], tmp_path / "half.gguf")
    code, _, err = run_cli(capsys, "run", "hi", "--target", str(half), "--no-draft")
    assert_one_line_error(code, err, "truncated")


def test_unknown_model_name(capsys):
    code, _, err = run_cli(capsys, "run", "hi", "--target", "llama-9000", "--no-draft")
    assert_one_line_error(code, err, "unknown model 'llama-9000'")


def test_incompatible_pair_is_refused_before_loading(capsys, tiny_models):
    code, _, err = run_cli(capsys, "run", "hi", "--target", str(tiny_models["a"]), "--draft", str(tiny_models["other"]))
    assert_one_line_error(code, err, "cannot draft for", "vocab sizes differ")


def test_prompt_longer_than_the_context(capsys, tiny_models):
    code, _, err = run_cli(capsys, "run", "word " * 400, "--target", str(tiny_models["a"]), "--no-draft", "--ctx", "256")
    assert_one_line_error(code, err, "prompt is", "context holds 256")


def test_bad_sampling_option(capsys, tiny_models):
    code, _, err = run_cli(capsys, "run", "hi", "--target", str(tiny_models["a"]), "--no-draft", "--top-p", "1.5")
    assert_one_line_error(code, err, "top_p", usage=True)


def test_check_exit_status_on_tiny_pairs(capsys, tiny_models):
    code, out, _ = run_cli(capsys, "models", "check", str(tiny_models["b"]), str(tiny_models["a"]))
    assert code == 0 and out.startswith("compatible")
    code, out, _ = run_cli(capsys, "models", "check", str(tiny_models["other"]), str(tiny_models["a"]))
    assert code == 1 and "vocab sizes differ" in out


def test_a_real_process_prints_no_traceback(tmp_path):
    result = subprocess.run([sys.executable, "-m", "specllama", "models", "info", str(tmp_path / "nope.gguf")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and result.stderr.startswith("specllama: error:")
