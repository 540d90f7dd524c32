"""What one chat request to an OpenAI-compatible server came back with, as a batch record needs it:
ServerReply, filled by server_client.parse_chat_reply from what every server sends, and
with_speculation, which adds what `specllama serve` alone sends: its "speculation" block (target
decodes, drafts and acceptances per drafter; docs/serve.md). Other servers send none, and their
replies pass through unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace


@dataclass
class ServerReply:
    text: str
    finish_reason: str | None
    tokens: int
    prompt_tokens: int | None
    seconds: float  # wall time of the request, as this client saw it
    tokens_per_s: float
    drafted: int | None  # llama.cpp timings.draft_n, when the server speculates
    accepted: int | None
    # specllama serve's "speculation" block (other servers send none; with_speculation): target
    # decodes, and drafts and acceptances per drafter, so its records read like a local batch's.
    steps: int | None = None
    drafted_by: dict[str, int] | None = None
    accepted_by: dict[str, int] | None = None


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
