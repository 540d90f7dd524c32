"""OpenAI's response shapes (chat.completion, text_completion, their stream chunks) from the
engine's Summary, plus the speculation numbers each answer carries.

`timings` uses llama-server's names (prompt_n, predicted_per_second, draft_n, draft_n_accepted, ...)
so tools written for it, `specllama batch --server` among them, read ours; `speculation` adds what
only specllama knows: the drafter, and drafts and acceptances per source (suffix, model).
`usage.prompt_tokens_details.cached_tokens` is OpenAI's own field for prompt tokens not processed
again: here, the tokens found in the slot's cache.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from specllama.decoding.events import Summary

FINISH_REASONS = {"stop": "stop", "stop_string": "stop", "length": "length", "context": "length"}


@dataclass
class Answer:
    """What one response is built around; `chat` picks the shapes."""

    model: str
    chat: bool
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created: int = field(default_factory=lambda: int(time.time()))

    @property
    def response_id(self) -> str:
        return ("chatcmpl-" if self.chat else "cmpl-") + self.id

    def _envelope(self, chunk: bool) -> dict:
        kind = "chat.completion" if self.chat else "text_completion"
        if chunk and self.chat:
            kind += ".chunk"
        return {"id": self.response_id, "object": kind, "created": self.created, "model": self.model}

    def _choice(self, text: str | None, finish_reason: str | None, chunk: bool, first: bool = False) -> dict:
        if not self.chat:
            return {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish_reason}
        if chunk:
            delta = {"role": "assistant", "content": text or ""} if first else ({"content": text} if text else {})
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                "finish_reason": finish_reason}

    def whole(self, summary: Summary) -> dict:
        """The non-streamed answer."""
        return {**self._envelope(chunk=False),
                "choices": [self._choice(summary.text, finish_reason(summary), chunk=False)],
                "usage": usage(summary), "timings": timings(summary), "speculation": speculation(summary)}

    def first_chunk(self) -> dict:
        """A chat stream opens with the assistant's role (as OpenAI's does); completions need none."""
        return {**self._envelope(chunk=True), "choices": [self._choice("", None, chunk=True, first=True)]}

    def text_chunk(self, text: str) -> dict:
        return {**self._envelope(chunk=True), "choices": [self._choice(text, None, chunk=True)]}

    def last_chunk(self, summary: Summary) -> dict:
        """The finish reason, with the speculation numbers (llama-server puts `timings` here too)."""
        return {**self._envelope(chunk=True), "choices": [self._choice("", finish_reason(summary), chunk=True)],
                "timings": timings(summary), "speculation": speculation(summary)}

    def usage_chunk(self, summary: Summary) -> dict:
        """stream_options.include_usage: a last chunk with no choices and the usage."""
        return {**self._envelope(chunk=True), "choices": [], "usage": usage(summary)}


def finish_reason(summary: Summary) -> str:
    return FINISH_REASONS.get(summary.finish_reason, summary.finish_reason)


def usage(summary: Summary) -> dict:
    return {"prompt_tokens": summary.prompt_tokens, "completion_tokens": summary.tokens,
            "total_tokens": summary.prompt_tokens + summary.tokens,
            "prompt_tokens_details": {"cached_tokens": summary.reused_tokens}}


def timings(summary: Summary) -> dict:
    prefilled = summary.prompt_tokens - summary.reused_tokens
    return {
        "cache_n": summary.reused_tokens,
        "prompt_n": prefilled,
        "prompt_ms": round(summary.t_prompt * 1000, 3),
        "prompt_per_second": round(prefilled / summary.t_prompt, 3) if summary.t_prompt > 0 else 0.0,
        "predicted_n": summary.tokens,
        "predicted_ms": round(summary.t_generate * 1000, 3),
        "predicted_per_second": round(summary.tokens_per_s, 3),
        "draft_n": summary.drafted,
        "draft_n_accepted": summary.accepted,
    }


def speculation(summary: Summary) -> dict:
    return {"drafter": summary.drafter, "steps": summary.steps, "drafted": summary.drafted,
            "accepted": summary.accepted, "acceptance": summary.acceptance,
            "mean_accepted": round(summary.mean_accepted, 3),
            "drafted_by": dict(summary.drafted_by), "accepted_by": dict(summary.accepted_by)}
