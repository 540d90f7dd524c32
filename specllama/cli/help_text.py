"""What the command line says before any command runs: bare `specllama`'s short help (the three
commands people start with), and the one example each command's --help starts with.

The examples live in one table, so every command (and `models` subcommand) has exactly one, and
tests/integration/test_docs_commands.py parses each of them like a command from the docs.
"""

from __future__ import annotations

import argparse

SHORT_HELP = """specllama: faster local text generation with speculative decoding on llama.cpp

Start with:
  specllama chat                  a terminal chat (the default pair is fetched on first use)
  specllama run "a question"      one answer on stdout
  specllama serve                 an OpenAI-compatible API on 127.0.0.1:8080

Every command: specllama --help · one command's options: specllama COMMAND --help"""

# Command path (as typed after `specllama`) -> the example its --help starts with.
EXAMPLES = {
    "chat": 'specllama chat "explain this regex: ^a+$"',
    "run": 'specllama run "Explain Python\'s GIL in two sentences."',
    "batch": "specllama batch prompts.jsonl -o answers.jsonl",
    "bench": "specllama bench --prompts bench/prompts.jsonl --repeat 3",
    "serve": "specllama serve --port 8080",
    "ps": "specllama ps --url http://127.0.0.1:8080",
    "pull": "specllama pull qwen2.5-coder-1.5b qwen2.5-coder-0.5b",
    "show": "specllama show qwen2.5-coder-1.5b",
    "costs": "specllama costs",
    "completion": "specllama completion bash > ~/.local/share/bash-completion/completions/specllama",
    "models": "specllama models list",
    "models list": "specllama models list --json",
    "models pull": "specllama models pull qwen2.5-coder-0.5b",
    "models add": "specllama models add my-coder ~/models/coder-q4_k_m.gguf --role target",
    "models rm": "specllama models rm qwen2.5-coder-7b",
    "models info": "specllama models info qwen2.5-coder-1.5b",
    "models check": "specllama models check qwen2.5-coder-0.5b qwen2.5-coder-1.5b",
    "models quantize": "specllama models quantize qwen2.5-coder-0.5b --type Q4_0",
    "models verify": "specllama models verify",
}


def subcommands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(path, parser) of every command and subcommand under `parser`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield path + (name,), child
                yield from subcommands(child, path + (name,))


def add_examples(parser: argparse.ArgumentParser) -> None:
    """Each command's description starts with its example (a command missing from EXAMPLES is a
    KeyError here: the parser is not built without one)."""
    for path, child in subcommands(parser):
        child.description = f"example: {EXAMPLES[' '.join(path)]}\n\n{child.description or ''}".rstrip()
