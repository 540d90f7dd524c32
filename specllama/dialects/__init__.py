"""Each model family's way of writing thinking and tool calls (its dialect), found from the GGUF's
chat template: one parser interface (dialect.Dialect), one table or decoder per family."""

from __future__ import annotations

from specllama.dialects.deepseek import DEEPSEEK
from specllama.dialects.dialect import Dialect, ToolSet
from specllama.dialects.gemma import GEMMA4
from specllama.dialects.glm import GLM
from specllama.dialects.harmony import HARMONY
from specllama.dialects.hermes import HERMES
from specllama.dialects.kimi import KIMI
from specllama.dialects.llama import LLAMA3
from specllama.dialects.mistral import MISTRAL
from specllama.dialects.parts import Reasoning
from specllama.dialects.qwen_xml import QWEN_XML

# Most specific first: Qwen3-Coder's and GLM's templates hold <tool_call> too, and a Hermes-style
# Llama fine-tune holds Llama's header markers as well as <tool_call>.
DIALECTS: tuple[Dialect, ...] = (HARMONY, GEMMA4, KIMI, DEEPSEEK, MISTRAL, QWEN_XML, GLM, HERMES, LLAMA3)
BY_NAME = {d.name: d for d in DIALECTS}

# A template with thinking but no tool format of these: its <think> markers alone are parsed.
THINK_ONLY = Dialect(name="think", detect=lambda t: "<think>" in t or "</think>" in t, think=("<think>", "</think>"),
                     markers=("<think>", "</think>"))


def detect(template: str | None) -> Dialect | None:
    """The dialect a chat template's text asks its model to write; None when none is known."""
    if not template:
        return None
    for dialect in DIALECTS:
        if dialect.detect(template):
            return dialect
    return THINK_ONLY if THINK_ONLY.detect(template) else None


__all__ = ["BY_NAME", "DIALECTS", "THINK_ONLY", "Dialect", "Reasoning", "ToolSet", "detect"]
