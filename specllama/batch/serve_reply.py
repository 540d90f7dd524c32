"""What `specllama serve` adds to a chat answer, for batch --server's records: its "speculation"
block (target decodes, drafts and acceptances per drafter; docs/serve.md). Other servers send
none, and their replies pass through unchanged. Kept apart from server_client.parse_chat_reply,
which reads what every OpenAI-compatible server sends."""

from __future__ import annotations

import json
from dataclasses import replace

from specllama.batch.server_reply import ServerReply


def with_speculation(reply: ServerReply, data: bytes) -> ServerReply:
    """`reply` with steps, drafted_by and accepted_by from the body's "speculation", when it has one."""
    try:
        spec = json.loads(data).get("speculation")
    except (ValueError, AttributeError):
        return reply
    if not isinstance(spec, dict):
        return reply
    steps = spec.get("steps")
    return replace(reply, steps=steps if _count(steps) else None, drafted_by=_counts(spec.get("drafted_by")),
                   accepted_by=_counts(spec.get("accepted_by")))


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _counts(value: object) -> dict[str, int] | None:
    """A {source: count} object, or None when absent or not that shape."""
    if not isinstance(value, dict) or not all(isinstance(k, str) and _count(v) for k, v in value.items()):
        return None
    return dict(value)
