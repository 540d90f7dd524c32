"""Prompt files for `bench` and `batch`: JSONL (`{"id": ..., "prompt": ...}`) or plain text.

JSONL is recognised by a `.jsonl` suffix or, failing that, by the first non-blank line starting
with `{`; anything else is plain text, one prompt a line, whose id is its line number (stable
across reruns as long as the file is not edited, which is what resuming a batch needs; a batch
refuses to resume when a record's prompt is no longer the one at its id). Lines end at \n or
\r\n only; a UTF-8 byte-order mark is dropped; "-" reads stdin.

A bad line does not stop the others from being read: it becomes a `BadLine` with its line number,
and each consumer decides (batch skips it, bench refuses the file). Duplicate ids are always an
error, raised before any generation, because a resumed batch identifies its work by id.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from specllama.errors import SpecllamaError


class PromptFileError(SpecllamaError):
    """The prompts file cannot be used at all (missing, unreadable, duplicate ids, ...)."""


@dataclass(frozen=True)
class PromptItem:
    id: str | int  # as written in the file (JSONL) or the line number (plain text)
    prompt: str
    line: int
    system: str | None = None


@dataclass(frozen=True)
class BadLine:
    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


@dataclass
class PromptFile:
    path: Path
    items: list[PromptItem]
    bad: list[BadLine]


def id_key(value: str | int) -> str:
    """Ids compare as text, so `1` and `"1"` are the same prompt (they would be indistinguishable
    to anyone reading the output)."""
    return str(value)


def read_prompts(path: str | Path) -> PromptFile:
    path = Path(path)
    try:
        # utf-8-sig: a byte-order mark (Windows editors write one) is not part of the first line,
        # which would otherwise hide a JSONL file's leading `{`.
        # Bytes decoded by hand: text mode would also turn a lone \r inside a line into a line end.
        data = sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()  # "-": stdin, as for run
        text = data.decode("utf-8-sig")
    except FileNotFoundError:
        raise PromptFileError(f"prompts file not found: {path}") from None
    except UnicodeDecodeError as e:
        raise PromptFileError(f"{path} is not UTF-8 text: {e}") from None
    except OSError as e:
        raise PromptFileError(f"cannot read {path}: {e.strerror or e}") from None

    # Lines end at \n (and \r\n) only: str.splitlines() also splits at form feeds, \x85 and
    # U+2028, which can sit inside a prompt (or a JSON string) and would shift every later id.
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    first = next((ln for ln in lines if ln.strip()), "")
    is_jsonl = path.suffix.lower() == ".jsonl" or (path.suffix.lower() != ".txt" and first.lstrip().startswith("{"))
    items: list[PromptItem] = []
    bad: list[BadLine] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        if is_jsonl:
            parsed = _parse_json_line(raw, number)
            (bad if isinstance(parsed, BadLine) else items).append(parsed)
        else:
            items.append(PromptItem(id=number, prompt=raw, line=number))

    _refuse_duplicates(path, items)
    return PromptFile(path, items, bad)


def _parse_json_line(raw: str, number: int) -> PromptItem | BadLine:
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as e:
        return BadLine(number, f"not valid JSON ({e.msg} at column {e.colno})")
    except ValueError as e:  # a number with thousands of digits
        return BadLine(number, f"not usable JSON ({e})")
    except RecursionError:
        return BadLine(number, "not usable JSON (nested too deeply)")
    if not isinstance(obj, dict):
        return BadLine(number, "expected a JSON object with \"id\" and \"prompt\"")
    prompt = obj.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return BadLine(number, "\"prompt\" is missing or not a non-empty string")
    pid = obj.get("id", number)  # no id: the line number, like plain text
    if isinstance(pid, bool) or not isinstance(pid, (str, int)) or (isinstance(pid, str) and not pid):
        return BadLine(number, "\"id\" must be a non-empty string or an integer")
    system = obj.get("system")
    if system is not None and not isinstance(system, str):
        return BadLine(number, "\"system\" must be a string")
    for key, value in (("prompt", prompt), ("id", pid), ("system", system)):
        if isinstance(value, str) and has_lone_surrogate(value):
            return BadLine(number, f"\"{key}\" holds a lone surrogate escape (such as \\ud800), which is not text")
    return PromptItem(id=pid, prompt=prompt, line=number, system=system)


def has_lone_surrogate(text: str) -> bool:
    """JSON's \\ud800 escapes (and undecodable argv bytes) give str values that cannot be written
    as UTF-8: they would fail at the tokenizer or the output file, far from their cause."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _refuse_duplicates(path: Path, items: list[PromptItem]) -> None:
    first_seen: dict[str, int] = {}
    clashes: list[str] = []
    for item in items:
        key = id_key(item.id)
        if key in first_seen:
            clashes.append(f"{key!r} on lines {first_seen[key]} and {item.line}")
        else:
            first_seen[key] = item.line
    if clashes:
        more = f" (and {len(clashes) - 3} more)" if len(clashes) > 3 else ""
        raise PromptFileError(f"{path}: duplicate prompt ids: " + "; ".join(clashes[:3]) + more
                              + " (ids must be unique so results and resumed runs can be matched to prompts)")
