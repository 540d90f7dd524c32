#!/usr/bin/env python3
"""A request saved by capture_requests.py, trimmed for tests/fixtures/clients/: every field and
every kind of block, tool and item kept; long texts (system prompts, tool descriptions, file
listings) cut to their first words; the tools cut to the names given (plus one of every kind of
tool the request has); the headers that would be wrong on replay (Host, Content-Length) dropped.

    python scripts/trim_capture.py CAPTURED.json OUT.json --tools Bash,Read,Edit --client "claude-code 2.1.332"
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

KEEP_CHARS = 100  # strings up to this long are kept whole (ids, short instructions, the billing line)
WORDS = 8
DROP_HEADERS = {"host", "content-length", "accept-encoding", "connection"}


def trim_text(value: object) -> object:
    if isinstance(value, str):
        if len(value) <= KEEP_CHARS or _is_json(value):
            return value
        return " ".join(value.split()[:WORDS]) + " [trimmed]"
    if isinstance(value, list):
        return [trim_text(v) for v in value]
    if isinstance(value, dict):
        return {k: trim_text(v) for k, v in value.items()}
    return value


def _is_json(text: str) -> bool:
    """Tool-call arguments and the like: their structure is the point, and they are short here."""
    if not text.lstrip().startswith(("{", "[")):
        return False
    try:
        json.loads(text)
        return len(text) < 2000
    except ValueError:
        return False


def _tool_name(tool: dict) -> str | None:
    return tool.get("name") or (tool.get("function") or {}).get("name")


def _tool_kind(tool: dict) -> tuple:
    """What makes a tool a different kind: its type and its extra top-level fields."""
    return (tool.get("type"), tuple(sorted(k for k in tool if k not in ("name", "description", "strict"))))


def keep_tools(tools: list, names: set[str]) -> list:
    kept, kinds = [], set()
    for tool in tools:
        kind = _tool_kind(tool)
        if _tool_name(tool) in names or kind not in kinds:
            if tool.get("type") == "namespace":  # a namespace keeps its named functions, or its first two
                inner = [t for t in tool.get("tools", []) if t.get("name") in names] or tool.get("tools", [])[:2]
                tool = {**tool, "tools": inner}
            kept.append(tool)
            kinds.add(kind)
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("captured", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--tools", default="", help="names of the tools to keep (comma-separated)")
    parser.add_argument("--client", required=True, help="client and version, recorded in the fixture")
    options = parser.parse_args()
    record = json.loads(options.captured.read_text())
    body = record["body"]
    if isinstance(body.get("tools"), list):
        body["tools"] = keep_tools(body["tools"], set(filter(None, options.tools.split(","))))
    record["body"] = trim_text(body)
    record["headers"] = {k: v for k, v in record["headers"].items() if k.lower() not in DROP_HEADERS}
    record = {"client": options.client, **record}
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
