"""The grammar a call follows, per dialect (llguidance's Lark, each function's arguments held to its
schema by %json), from where the answer's forced start (ToolUse.opening) leaves off; under
tool_choice "auto" a lazy grammar that starts at the dialect's opening marker.

Written for the dialects whose arguments are JSON after a fixed head: Hermes (tools.py), Mistral
and Llama 3. The XML-like dialects (Qwen3-Coder, GLM, DeepSeek DSML) write values as raw text a
JSON schema does not describe, and Llama 3's bare JSON has no marker to trigger on under "auto":
there the call is made certain by the forced opening alone and parsed as written (no grammar).

A request's response_format beside tools (issue 41) holds an answer that is not a call: under "auto"
the answer is that JSON or calls (Hermes, Mistral: their call grammar; the other dialects: any text
after one of their call openings); under "none" it is the whole constraint; a forced call is the
call alone. Harmony writes every answer inside a channel header, so there it is not applied."""

from __future__ import annotations

import json
from typing import Callable

from specllama.decoding.constraint import Constraint
from specllama.dialects.dialect import Dialect
from specllama.server.tools import ToolUse, _schema_text, answer_rule, tool_constraint

Namer = Callable[[str], str]  # text -> how a grammar names it (<[id]> for one special token)


def call_constraint(use: ToolUse, dialect: Dialect | None, grammar_token,
                    answer: Constraint | None = None) -> Constraint | None:
    """The grammar a call follows in the model's dialect (dialect_grammars.py), from where the answer's
    forced start leaves off; None where the dialect has none (the call is still parsed). `answer`:
    the request's response_format, kept for an answer that is not a call (see tool_constraint)."""
    if not use.parses or dialect is None:
        return answer
    return dialect_constraint(use, dialect, grammar_token, answer)


def dialect_constraint(use: ToolUse, dialect: Dialect, grammar_token: Namer,
                       answer: Constraint | None = None) -> Constraint | None:
    if answer is not None and use.choice == "auto":
        return _calls_or_answer(use, dialect, grammar_token, answer)
    maker = GRAMMARS.get(dialect.name)
    return maker(use, grammar_token) if maker is not None else None


def _hermes(use: ToolUse, token: Namer, answer: Constraint | None = None) -> Constraint | None:
    return tool_constraint(use, token("<tool_call>"), token("</tool_call>"), answer)


def _calls_or_answer(use: ToolUse, dialect: Dialect, token: Namer, answer: Constraint) -> Constraint | None:
    """Under "auto": the response_format's JSON, or calls (from the first token: no longer lazy)."""
    if dialect.name == "hermes":
        return _hermes(use, token, answer)
    if dialect.name == "harmony":
        return None
    if dialect.name == "mistral":
        calls = _mistral(use, token)
        rules = [line for line in calls.grammar.splitlines() if not line.startswith("start:")]
        opener = token("[TOOL_CALLS]")
        more = f" ({opener} call)*" if use.parallel else ""
        return Constraint(kind="lark", grammar="\n".join([f"start: answer | {opener} call{more}", answer_rule(answer),
                                                            *rules]))
    # After an opening, any text and any token: a regex matches text alone, and the dialect's closing
    # markers are special tokens (<[*]>: any token) where the vocabulary has them.
    openers = " | ".join(token(open_) for open_, _ in dialect.regions)
    return Constraint(kind="lark", grammar="\n".join([f"start: answer | ({openers}) rest", answer_rule(answer),
                                                        "rest: (/(?s:.+)/ | <[*]>)*"]))


def _names(use: ToolUse) -> list[str]:
    return [tool["function"]["name"] for tool in use.tools]


def _mistral(use: ToolUse, token: Namer) -> Constraint | None:
    """[TOOL_CALLS]NAME[ARGS]{...}, repeated for parallel calls."""
    opener, args = token("[TOOL_CALLS]"), token("[ARGS]")
    lines = []
    if use.choice == "function":
        lines += ["start: args_0", "args_0: %json " + _schema_text(use, use.name)]
        return Constraint(kind="lark", grammar="\n".join(lines))
    more = f" ({opener} call)*" if use.parallel else ""
    lines.append(f"start: call{more}")  # after the forced [TOOL_CALLS], or after the trigger under auto
    names = _names(use)
    lines.append("call: " + " | ".join(f"call_{i}" for i in range(len(names))))
    for i, name in enumerate(names):
        lines.append(f"call_{i}: {json.dumps(name, ensure_ascii=False)} {args} args_{i}")
        lines.append(f"args_{i}: %json " + _schema_text(use, name))
    return Constraint(kind="lark", grammar="\n".join(lines), trigger="[TOOL_CALLS]" if use.choice == "auto" else None)


def _llama3(use: ToolUse, token: Namer) -> Constraint | None:
    """{"name": NAME, "parameters": {...}}: only where the opening was forced (no marker to trigger on)."""
    if use.choice == "function":
        return Constraint(kind="lark", grammar=f'start: args_0 "}}"\nargs_0: %json {_schema_text(use, use.name)}')
    if use.choice != "required":
        return None
    names = _names(use)
    lines = ["start: " + " | ".join(f"call_{i}" for i in range(len(names)))]
    for i, name in enumerate(names):
        head = json.dumps(json.dumps(name, ensure_ascii=False) + ', "parameters": ', ensure_ascii=False)
        lines.append(f'call_{i}: {head} args_{i} "}}"')
        lines.append(f"args_{i}: %json " + _schema_text(use, name))
    return Constraint(kind="lark", grammar="\n".join(lines))


GRAMMARS: dict[str, Callable[[ToolUse, Namer], Constraint | None]] = {
    "hermes": _hermes, "mistral": _mistral, "llama3": _llama3}
