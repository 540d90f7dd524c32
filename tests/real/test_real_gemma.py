"""A second real family: Gemma 3 270M (its own 262k vocabulary, sliding-window attention, a base
model without a chat template) runs with the suffix drafter and gives plain decoding's text."""

from __future__ import annotations

import json

import pytest

from specllama.cli.main import main

pytestmark = pytest.mark.real_models

PROMPT = ("def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\n\n"
          "def fibonacci_memo(n, memo={}):\n")


def test_gemma_drafts_from_the_text_and_gives_plain_decodings_answer(real_model, tmp_path, capsys):
    real_model("gemma3-270m")  # through the store: its four part packages
    prompt = tmp_path / "prompt.txt"
    prompt.write_text(PROMPT)
    common = ["run", "-m", "gemma3-270m", "-f", str(prompt), "--exact", "-n", "48", "--json", "--ctx", "1024"]
    assert main([*common, "--drafter", "none"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main([*common, "--drafter", "suffix"]) == 0
    spec = json.loads(capsys.readouterr().out)
    assert spec["text"] == plain["text"] and spec["drafted"] > spec["accepted"] > 0


def test_gemma_ends_at_its_own_turn_marker_and_offers_no_tool_calls(real_model):
    """Its stop tokens come from its GGUF (<end_of_turn> among them); without a chat template it
    cannot put a tool list into a prompt, so a server refuses tools for it rather than drop them."""
    from specllama.llama.model import GGUFModel

    model = GGUFModel(real_model("gemma3-270m"), vocab_only=True)
    assert {"<eos>", "<end_of_turn>"} <= {model.token_text(t) for t in model.eog_ids}
    assert model.chat_template is None and model.tool_call_format is None
