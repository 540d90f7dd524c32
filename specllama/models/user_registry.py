"""Entries written to and removed from the user's models.toml (`models add`, `models rm`,
`models quantize`), as text: the user's comments and layout around them stay as they were.

Strings are written as JSON strings, which are valid TOML basic strings (a Windows path's
backslashes and a quote in a description included).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from specllama.errors import ConfigError

_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")


def toml_value(value: str | int) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)


def entry_text(name: str, fields: dict[str, str | int], tables: dict[str, dict[str, str | int]] | None = None) -> str:
    """`[models."NAME"]` with its keys, then `[models."NAME".SUB]` for each sub-table (hub, registry)."""
    lines = ["", f"[models.{toml_value(name)}]"] + [f"{k} = {toml_value(v)}" for k, v in fields.items()]
    for sub, values in (tables or {}).items():
        lines += [f"[models.{toml_value(name)}.{sub}]"] + [f"{k} = {toml_value(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


def append_entry(user_file: Path, text: str) -> None:
    user_file.parent.mkdir(parents=True, exist_ok=True)
    with open(user_file, "a", encoding="utf-8") as f:
        f.write(text)


def _table_path(header: str) -> list[str]:
    """`models."a.b".hub` -> ["models", "a.b", "hub"] (quoted keys may hold dots)."""
    parts = re.findall(r'"((?:[^"\\]|\\.)*)"|\'([^\']*)\'|([^.\s]+)', header)
    return [json.loads(f'"{q}"') if q else (s or bare) for q, s, bare in parts]


def remove_entry(user_file: Path, name: str) -> bool:
    """Remove `[models.NAME]` and its sub-tables from the file; False when it has no such entry."""
    try:
        lines = user_file.read_text(encoding="utf-8").splitlines(keepends=True)
    except FileNotFoundError:
        return False
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{user_file}: cannot read: {e}") from None
    kept, inside, found = [], False, False
    for line in lines:
        match = _HEADER.match(line)
        if match and not line.lstrip().startswith("[["):
            path = _table_path(match.group(1))
            inside = path[:2] == ["models", name]
            found |= inside
        if not inside:
            kept.append(line)
    if found:
        while kept and not kept[-1].strip():  # the blank line that separated the entry
            kept.pop()
        user_file.write_text("".join(kept) + ("\n" if kept else ""), encoding="utf-8")
    return found
