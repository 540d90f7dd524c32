"""End to end with the real models, as a user runs them (real processes, real GGUF files)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.real_models


def specllama(*argv, timeout=300):
    # stdin /dev/null: `run` reads piped stdin into the prompt, and the runner's stdin may be a pipe
    return subprocess.run([sys.executable, "-m", "specllama", *argv], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_run_no_draft_prints_a_completion_from_the_target(real_model):
    real_model("qwen2.5-coder-1.5b")  # fetched through the store before timing matters
    result = specllama("run", "Write a Python function that adds two numbers.", "--no-draft",
                       "--max-tokens", "24", "--stats=full")
    assert result.returncode == 0, result.stderr
    assert "def " in result.stdout
    headline, load = result.stderr.splitlines()[:2]
    assert headline.startswith("24 tokens in ") and " tok/s · plain decoding" in headline and load.startswith("load ")
    assert "qwen2.5-coder-1.5b" in result.stderr  # --stats=full names the models


def test_check_says_the_qwen_pair_is_compatible(real_model_paths):
    result = specllama("models", "check", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")
    assert result.returncode == 0 and result.stdout.startswith("compatible"), result.stdout + result.stderr


def test_check_refuses_smollm_for_qwen_with_the_reason(real_model_paths):
    result = specllama("models", "check", "smollm2-135m", "qwen2.5-coder-1.5b")
    assert result.returncode != 0
    assert "vocab sizes differ" in result.stdout and "token text differs" in result.stdout


def test_models_list_shows_the_cached_pair(real_model_paths):
    result = specllama("models", "list")
    assert result.returncode == 0
    line = next(row for row in result.stdout.splitlines() if row.startswith("qwen2.5-coder-1.5b"))
    assert "target" in line and "yes" in line
