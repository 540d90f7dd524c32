"""Stopping one request: a handle per request, never a flag on the engine.

A front-end keeps the handle of each request it started (a chat's answer, a server's client) and
calls `cancel()` from any thread; the engine reads it between steps and finishes that request with
finish_reason "cancelled", freeing its slot. A handle cancelled before its request was admitted
stops it before its prefill. Nothing is ever cleared by the engine: a cancel cannot be lost by
arriving just before a generation starts (the chat used to send it twice for that reason).
"""

from __future__ import annotations

import threading


class CancelHandle:
    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def __repr__(self) -> str:
        return f"CancelHandle(cancelled={self.cancelled})"
