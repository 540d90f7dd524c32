"""The model's text -> OpenAI tool calls, for chat templates of the Hermes kind (Qwen2.5, Qwen3,
Hermes): a call is `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`.

One parser serves the streamed and the whole answer (the whole text is fed in one piece), so both
give the same content and calls for any split of the text into pieces. A call is handed on only
once it is complete and its JSON parses: a streamed client gets each call whole (its id and name
in one delta, its arguments in the next), never a half call it would have to take back. A call
whose JSON does not parse is given back as plain text content, never a 500: without a grammar a
model may write anything. Whitespace around calls is dropped (the template's newlines), the
text's own whitespace kept.

Small models do not always use the tags: Qwen2.5-Coder 1.5B, offered tools under `tool_choice:
"auto"`, answers with the call as a fenced JSON block (```json {"name": ..., "arguments": ...} ```).
An answer that *starts* with `{` or a code fence is therefore held back to its end, and is a call
(or several: a JSON list) when its JSON is one whose names are all offered tools; otherwise it is
the content it was. Streamed clients then get such an answer at its end, as a whole client does.
"""

from __future__ import annotations

from specllama.dialects.calls import CLOSE, FENCED, OPEN, ToolCall, bare_calls, new_call_id, parse_call

__all__ = ["CLOSE", "FENCED", "OPEN", "ToolCall", "ToolCallParser", "bare_calls", "new_call_id", "parse_call",
           "split_calls"]


def ToolCallParser(forced: str = "", names: frozenset[str] = frozenset()):  # noqa: N802 - was a class
    """The Hermes dialect's answer parser (dialects/hermes.py): feed(text) -> parts, then end() ->
    parts; a part is content (str), thinking (Reasoning) or a ToolCall. `forced` is text the answer
    began with in the prompt (a forced call's opening), parsed first; `names`: the offered functions
    (a bare JSON call naming them counts)."""
    from specllama.dialects.answer import AnswerParser
    from specllama.dialects.dialect import ToolSet
    from specllama.dialects.hermes import HERMES

    return AnswerParser(HERMES, ToolSet({name: {} for name in names}), forced)


def split_calls(text: str, forced: str = "", names: frozenset[str] = frozenset(),
                cut: bool = False) -> tuple[str | None, list[ToolCall]]:
    """A whole answer: (its content, None when empty; its calls). `cut`: max_tokens ended the
    answer, so an unfinished call is a half call: neither a call nor content."""
    from specllama.dialects.answer import split_answer

    content, _, calls = split_answer(ToolCallParser(forced, names=names), text, cut)
    return content, calls
