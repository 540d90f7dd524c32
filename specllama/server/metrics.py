"""What GET /metrics reports, in Prometheus' text format.

A handful of fixed series, written by the engine thread and read by the handler under one lock:
the exposition format for them is a few lines, so no client library is needed (prometheus_client
would bring a registry and process collectors for eleven numbers).
"""

from __future__ import annotations

import threading
import time
from collections import deque

from specllama.decoding.events import DoneEvent, FailedEvent, StepEvent

RATE_WINDOW = 10.0  # seconds: tokens/s is measured over this much recent time


class Metrics:
    def __init__(self, slots: int):
        self.slots = slots
        self._lock = threading.Lock()
        self.requests: dict[str, int] = {}  # outcome (finish reason, cancelled, refused, failed) -> count
        self.prompt_tokens = 0
        self.reused_tokens = 0
        self.generated_tokens = 0
        self.drafted: dict[str, int] = {}
        self.accepted: dict[str, int] = {}
        self._recent: deque[float] = deque()  # when each recent token was generated

    def token(self) -> None:
        now = time.monotonic()
        with self._lock:
            self.generated_tokens += 1
            self._recent.append(now)
            while self._recent and self._recent[0] < now - RATE_WINDOW:
                self._recent.popleft()

    def step(self, step: StepEvent) -> None:
        if not step.drafted:
            return
        with self._lock:
            for source, (drafted, accepted) in step.by_source().items():
                self.drafted[source] = self.drafted.get(source, 0) + drafted
                self.accepted[source] = self.accepted.get(source, 0) + accepted

    def done(self, event: DoneEvent | FailedEvent) -> None:
        if isinstance(event, FailedEvent):
            self.finished("failed")
            return
        summary = event.summary
        with self._lock:
            self.prompt_tokens += summary.prompt_tokens
            self.reused_tokens += summary.reused_tokens
        self.finished(summary.finish_reason)

    def finished(self, outcome: str) -> None:
        with self._lock:
            self.requests[outcome] = self.requests.get(outcome, 0) + 1

    def tokens_per_s(self) -> float:
        now = time.monotonic()
        with self._lock:
            return sum(1 for t in self._recent if t >= now - RATE_WINDOW) / RATE_WINDOW

    def render(self, active: int, queued: int, preparing: int = 0, abandoned: int = 0, cache: dict | None = None) -> str:
        """`cache`: the prompt cache's report (runtime/prompt_cache.py), None without one."""
        rate = self.tokens_per_s()
        with self._lock:
            drafted, accepted = sum(self.drafted.values()), sum(self.accepted.values())
            lines = [
                *_series("specllama_requests_active", "gauge", "requests holding a slot", [("", active)]),
                *_series("specllama_requests_queued", "gauge", "requests waiting for a slot", [("", queued)]),
                *_series("specllama_requests_preparing", "gauge", "request bodies being parsed and tokenized, or "
                         "waiting for that", [("", preparing)]),
                *_series("specllama_preparing_abandoned_total", "counter", "request bodies whose parsing or "
                         "tokenizing was dropped or stopped part way (the client left, the server stopped)",
                         [("", abandoned)]),
                *_series("specllama_slots", "gauge", "requests decoded together at most", [("", self.slots)]),
                *_series("specllama_requests_total", "counter", "finished requests by outcome (finish reason, "
                         "cancelled, refused, failed)",
                         [(f'outcome="{k}"', v) for k, v in sorted(self.requests.items())]),
                *_series("specllama_prompt_tokens_total", "counter", "prompt tokens", [("", self.prompt_tokens)]),
                *_series("specllama_prompt_tokens_reused_total", "counter",
                         "prompt tokens found in a slot's cache (not prefilled again)", [("", self.reused_tokens)]),
                *_series("specllama_generated_tokens_total", "counter", "tokens generated",
                         [("", self.generated_tokens)]),
                *_series("specllama_tokens_per_second", "gauge", f"tokens generated per second over the last "
                         f"{RATE_WINDOW:.0f} s, all requests together", [("", round(rate, 3))]),
                *_series("specllama_draft_tokens_total", "counter", "draft tokens verified, by drafter",
                         [(f'source="{k}"', v) for k, v in sorted(self.drafted.items())]),
                *_series("specllama_draft_tokens_accepted_total", "counter", "draft tokens accepted, by drafter",
                         [(f'source="{k}"', v) for k, v in sorted(self.accepted.items())]),
                *_series("specllama_acceptance_ratio", "gauge", "accepted / drafted, all drafters, since start",
                         [("", round(accepted / drafted, 4) if drafted else 0.0)]),
            ]
        return "\n".join(lines + (prompt_cache_series(cache) if cache else [])) + "\n"


def _series(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    lines += [f"{name}{{{labels}}} {value}" if labels else f"{name} {value}" for labels, value in samples]
    return lines


def prompt_cache_series(cache: dict) -> list[str]:
    where = ("memory", "disk")
    return [
        *_series("specllama_prompt_cache_entries", "gauge", "prompt prefixes kept beyond the slots",
                 [(f'where="{w}"', cache[f"{w}_entries"]) for w in where]),
        *_series("specllama_prompt_cache_bytes", "gauge", "bytes they take",
                 [(f'where="{w}"', cache[f"{w}_bytes"]) for w in where]),
        *_series("specllama_prompt_cache_limit_bytes", "gauge", "the most they may take (--cache-ram, --cache-disk)",
                 [(f'where="{w}"', cache[f"{w}_limit"]) for w in where]),
        *_series("specllama_prompt_cache_hits_total", "counter", "prompts that started from a kept prefix",
                 [(f'where="{w}"', cache["hits"][w]) for w in where]),
        *_series("specllama_prompt_cache_tokens_total", "counter", "prompt tokens restored instead of prefilled",
                 [(f'where="{w}"', cache["tokens"][w]) for w in where]),
    ]
