"""Earlier prompts, one ↑ away in the input box, as in a shell: ↑ steps back through what was
sent (this session's and a reopened conversation's questions), ↓ forward again, and past the
newest to what was being typed before ↑ was first pressed."""

from __future__ import annotations

LIMIT = 500


class Recall:
    def __init__(self) -> None:
        self.entries: list[str] = []
        self._at: int | None = None  # the entry shown; None: not browsing
        self._draft = ""  # what was in the box when browsing began

    def remember(self, text: str) -> None:
        text = text.strip()
        if text and (not self.entries or self.entries[-1] != text):
            self.entries.append(text)
            del self.entries[:-LIMIT]
        self._at = None

    def back(self, current: str) -> str | None:
        """The entry before the one shown (None: there is none)."""
        if self._at is None:
            if not self.entries:
                return None
            self._draft, self._at = current, len(self.entries)
        if self._at == 0:
            return None
        self._at -= 1
        return self.entries[self._at]

    def forward(self) -> str | None:
        """The entry after the one shown, or the draft past the newest (None: not browsing)."""
        if self._at is None:
            return None
        self._at += 1
        if self._at >= len(self.entries):
            self._at = None
            return self._draft
        return self.entries[self._at]
