"""What one chat request to an OpenAI-compatible server came back with, as a batch record needs it.

Its own module because two readers fill it: server_client.parse_chat_reply (what every server
sends) and serve_reply.with_speculation (what `specllama serve` adds); neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass


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
    # specllama serve's "speculation" block (other servers send none; batch/serve_reply.py): target
    # decodes, and drafts and acceptances per drafter, so its records read like a local batch's.
    steps: int | None = None
    drafted_by: dict[str, int] | None = None
    accepted_by: dict[str, int] | None = None
