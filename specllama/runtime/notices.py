"""A status line as the runtime hands it to a front-end: one fact, said once, in one line.

The runtime never prints: it returns notices, and each front-end shows them its own way (stderr for
the commands, the loading panel in the chat). `fact` names what the line is about, so a front-end
says each fact once per session however often it is produced (a chat that reloads its models, a
drafter that stays unused answer after answer); `detail` is the explanation behind it, shown with
-v/--verbose; `verbose_only` marks a line that changes nothing for the user (shown with -v only).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Notice:
    fact: str  # e.g. "drafter", "context", "exact": a later notice with the same fact is not said again
    text: str  # the one line
    detail: str = ""  # the why, for -v/--verbose
    verbose_only: bool = False  # True: a fact that changes nothing for the user, said with -v only
