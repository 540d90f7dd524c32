"""Status lines on stderr: one per fact, once per session, only when they matter.

Every notice (what resolving the options and loading the models had to say, a drafter that is not
paying) passes through one StatusLines: `-q/--quiet` silences them all, `-v/--verbose` adds the lines
that change nothing for the user and each line's explanation. A fact said once is not said again
(a chat reloading its models, a note repeated answer after answer). Errors are not status lines:
they always print (main.py).
"""

from __future__ import annotations

import sys
from typing import TextIO

from specllama.runtime.notices import Notice


class StatusLines:
    def __init__(self, quiet: bool = False, verbose: bool = False, stream: TextIO | None = None):
        self.quiet, self.verbose = quiet, verbose
        self._stream = stream
        self.said: set[str] = set()

    def __call__(self, notice: Notice) -> None:
        if self.quiet or (notice.verbose_only and not self.verbose) or notice.fact in self.said:
            return
        self.said.add(notice.fact)
        stream = self._stream or sys.stderr
        print(f"specllama: {notice.text}", file=stream)
        if self.verbose and notice.detail:
            print(f"specllama:   ({notice.detail})", file=stream)

    def say(self, text: str, fact: str | None = None) -> None:
        """A front-end's own status line (e.g. batch's prompts per decode)."""
        self(Notice(fact or text, text))
