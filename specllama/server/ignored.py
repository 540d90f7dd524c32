"""What a request carried that the server does not act on, said once per kind on stderr.

Agent clients send fields that tune a hosted service (Anthropic's `context_management`, OpenAI's
`prompt_cache_key`, ...): the server takes them and goes on, and `serve -v` says once per field
what it ignored and why, so a user wondering why an option has no effect finds the reason. Tools
that only the hosted service can run (web search, code execution) are left out of the prompt: that
changes what the model can do, so it is said once per tool kind without -v.
"""

from __future__ import annotations

import sys
import threading

VERBOSE = False  # set by `serve -v` (cmd_serve.py)
_said: set[tuple[str, str]] = set()
_lock = threading.Lock()  # requests are translated on several preparing threads


def note(route: str, what: str, why: str, *, always: bool = False) -> None:
    """One line the first time `what` is seen on `route` (at -v only, unless `always`)."""
    if not (VERBOSE or always):
        return
    with _lock:
        if (route, what) in _said:
            return
        _said.add((route, what))
    print(f"specllama serve: {route}: {what}: {why}", file=sys.stderr, flush=True)
