"""What a dialect's parser hands a writer: content (a str), thinking (Reasoning) and whole calls
(ToolCall, tool_calls.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reasoning:
    """A piece of the model's thinking (between the template's reasoning markers): OpenAI's
    `reasoning_content`, Anthropic's thinking block, a Responses reasoning item."""

    text: str
