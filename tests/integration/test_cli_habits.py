"""The habits users bring from llama.cpp, Ollama and llm: piped stdin joins the prompt, no prompt
prints the usage, a model name as the prompt gets a hint, llama.cpp's short options, one exit-code
table, help on every option, --json for scripts, shell completion."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specllama.cli.arguments import EXIT_CODES_TEXT
from specllama.cli.main import COMMANDS, build_parser, main

REPO = Path(__file__).resolve().parents[2]


def specllama(*argv: str, stdin_text: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """The real command in a child process; stdin is /dev/null unless text is piped in."""
    return subprocess.run([sys.executable, "-m", "specllama", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, input=stdin_text,
                          stdin=subprocess.DEVNULL if stdin_text is None else None)


def tiny_run(tiny_models, *argv: str) -> list[str]:
    return ["run", "-m", str(tiny_models["a"]), "--no-draft", "-n", "2", "-c", "256", "--json", *argv]


# --- the prompt -------------------------------------------------------------------------------------------


def test_piped_stdin_comes_before_the_prompt_argument(tiny_models):
    """`git diff | specllama run "review this"`: both reach the model (llm's rule)."""
    alone = json.loads(specllama(*tiny_run(tiny_models, "review this")).stdout)
    piped = specllama(*tiny_run(tiny_models, "review this"), stdin_text="diff --git a/x b/x\n" + "+ line\n" * 30)
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["prompt_tokens"] > alone["prompt_tokens"] + 30


def test_piped_stdin_alone_is_the_prompt(tiny_models):
    done = specllama(*tiny_run(tiny_models), stdin_text="word " * 25)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["prompt_tokens"] > 25  # the piped words, not a built-in sample prompt


def test_no_prompt_and_nothing_piped_prints_the_usage_and_exits_2(tmp_path):
    done = specllama("run", "-m", str(tmp_path / "never-loaded.gguf"))
    assert done.returncode == 2
    assert done.stderr.startswith("usage: specllama run") and "no prompt" in done.stderr
    assert "never-loaded" not in done.stderr and done.stdout == ""  # nothing loaded, nothing answered


def test_a_prompt_that_is_a_model_name_gets_a_hint(capsys):
    assert main(["run", "qwen2.5-coder-7b"]) == 2  # Ollama's `ollama run MODEL`
    err = capsys.readouterr().err
    assert "'qwen2.5-coder-7b' is a model name, not a prompt" in err and "specllama run -m qwen2.5-coder-7b" in err
    assert main(["run", "qwen2.5-coder"]) == 2
    assert "pair name" in capsys.readouterr().err


# --- options ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("short, long", [
    (["-m", "t.gguf"], ["--target", "t.gguf"]), (["-md", "d.gguf"], ["--draft", "d.gguf"]),
    (["-c", "512"], ["--ctx", "512"]), (["-t", "1"], ["--threads", "1"]), (["-n", "7"], ["--max-tokens", "7"]),
    (["-ngl", "99"], ["--gpu-layers", "99"]), (["-tb", "1"], ["--threads-batch", "1"]),
])
def test_llama_cpp_short_options_are_aliases(short, long):
    parser = build_parser()

    def parsed(argv):
        return {k: v for k, v in vars(parser.parse_args(["run", *argv, "hi"])).items() if not k.endswith("parser")}
    assert parsed(short) == parsed(long) != parsed([])


def _parsers(parser: argparse.ArgumentParser, path=("specllama",)):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _parsers(child, path + (name,))


def test_every_command_has_a_description_and_every_option_help_and_a_default():
    missing = []
    for path, parser in _parsers(build_parser()):
        if len(path) > 1 and not parser.description:
            missing.append(f"{' '.join(path)}: no description")
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.dest == "version":
                continue
            text = parser.formatter_class(prog="x")._get_help_string(action) or ""
            if not text:
                missing.append(f"{' '.join(path)} {action.dest}: no help")
            elif action.option_strings and not action.required and "default" not in text:
                missing.append(f"{' '.join(path)} {'/'.join(action.option_strings)}: no default shown")
    assert not missing, "\n".join(missing)


def test_the_exit_code_table_is_in_every_help():
    shown = [path for path, parser in _parsers(build_parser()) if EXIT_CODES_TEXT in " ".join(parser.format_help().split())]
    assert {path[-1] for path in shown} >= {"specllama", *COMMANDS}
    readme = (REPO / "README.md").read_text()
    assert "130" in readme and "exit status" in readme.lower()


# --- exit status: 0 ok, 1 failed, 2 usage, 130 interrupted --------------------------------------------------


def test_one_exit_code_table(tiny_models, tmp_path, capsys, monkeypatch):
    assert main(tiny_run(tiny_models, "hi")) == 0
    assert main(["run", "hi", "-m", str(tmp_path / "missing.gguf")]) == 1  # a missing model file: a failure
    assert main(["run", "hi", "-m", str(tiny_models["a"]), "--top-p", "1.5"]) == 2  # a wrong value: usage
    assert main(["run", "hi", "-f", str(tmp_path / "p.txt")]) == 2  # both a prompt and a file: usage
    with pytest.raises(SystemExit) as e:
        main(["run", "--ctx", "many"])
    assert e.value.code == 2  # argparse's own errors agree

    from specllama import runtime

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(runtime.Runtime, "__init__", interrupted)
    assert main(["run", "hi", "-m", str(tiny_models["a"])]) == 130
    capsys.readouterr()


# --- JSON for scripts ---------------------------------------------------------------------------------------


def test_run_json_is_one_object_with_the_text_and_the_statistics(tiny_models, capsys):
    assert main(tiny_run(tiny_models, "hi")) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)
    assert isinstance(doc["text"], str) and doc["tokens"] >= 1 and doc["tokens_per_s"] > 0
    assert {"acceptance", "drafted", "accepted", "finish_reason", "prompt_tokens", "t_generate_s"} <= doc.keys()


def test_models_list_and_info_json(tiny_models, capsys):
    assert main(["models", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    names = {m["name"] for m in listed["models"]}
    assert "qwen2.5-coder-1.5b" in names and listed["cache_bytes"] >= 0
    assert any(p["default"] for p in listed["pairs"])
    assert main(["models", "info", str(tiny_models["a"]), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["path"] == str(tiny_models["a"]) and info["vocab_size"] > 1000 and info["file_size"] > 0


# --- shell completion ---------------------------------------------------------------------------------------


def test_bash_completion_completes_commands_options_and_subcommands(capsys):
    assert main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    probe = script + """
complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMPREPLY=(); _shtab_specllama; echo "${COMPREPLY[*]}"; }
complete_words specllama mo
complete_words specllama run --max
complete_words specllama models ''
"""
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["models", "--max-tokens", "list pull add rm info check quantize verify"]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_name_the_commands_and_options(shell, capsys):
    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    for word in ("run", "models", "--target", "--max-tokens"):
        assert word in script, word
    checker = {"bash": ["bash", "-n"], "zsh": ["zsh", "-n"], "fish": ["fish", "--no-execute"]}[shell]
    if shutil.which(checker[0]) is None:
        pytest.skip(f"{checker[0]} is not installed: the script's syntax is not checked")
    checked = subprocess.run(checker, input=script, capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
