"""One line on stderr per generating request: what a user watching `specllama serve` needs to see
that a client is served and how well (llama-server's per-request timings, in one line).

    POST /v1/chat/completions 200 · prompt 20,114 (cached 19,873 from disk) · 64 tokens, stop · 21.4 tok/s ·
    drafted suffix 40 (31 accepted), model 12 (7) · max_tokens 100000 capped to 512
"""

from __future__ import annotations

import sys

from specllama.decoding.events import Summary


def request_line(route: str, status: int, summary: Summary | None, requested_max_tokens: int | None = None,
                 allowed_max_tokens: int | None = None) -> str:
    parts = [f"POST {route} {status}"]
    if summary is not None:
        source = f" from {summary.reused_from}" if summary.reused_from else ""  # the prompt cache's memory or disk
        parts.append(f"prompt {summary.prompt_tokens:,} (cached {summary.reused_tokens:,}{source})")
        parts.append(f"{summary.tokens} tokens, {summary.finish_reason or 'unfinished'}")
        parts.append(f"{summary.tokens_per_s:.1f} tok/s")
        if summary.drafted_by:
            parts.append("drafted " + ", ".join(f"{source or 'draft'} {n} ({summary.accepted_by.get(source, 0)} accepted)"
                                                for source, n in summary.drafted_by.items()))
        else:
            parts.append("no drafts")
    if requested_max_tokens is not None:
        parts.append(f"max_tokens {requested_max_tokens} capped to {allowed_max_tokens} (--max-tokens)")
    return " · ".join(parts)


def log_request(*args, **kwargs) -> None:
    print("specllama serve: " + request_line(*args, **kwargs), file=sys.stderr, flush=True)
