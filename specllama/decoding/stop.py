"""Stop strings over streamed text.

Text that might be the start of a stop string is held back until it is known not to be, so a
consumer that prints every piece never shows part of a stop string.
"""

from __future__ import annotations


class StopMatcher:
    def __init__(self, stops: tuple[str, ...] | list[str] = ()):
        self.stops = tuple(s for s in stops if s)
        self._held = ""
        self.matched = ""  # the stop string that ended the text (Anthropic's stop_sequence names it)

    def feed(self, text: str) -> tuple[str, bool]:
        """Returns (text safe to show, whether a stop string was completed)."""
        if not self.stops:
            return text, False
        buf = self._held + text
        found = [(i, -len(s), s) for s in self.stops if (i := buf.find(s)) >= 0]
        if found:
            cut, _, self.matched = min(found)  # the earliest; at one place, the longest
            self._held = ""
            return buf[:cut], True
        hold = max((n for s in self.stops for n in range(min(len(s) - 1, len(buf)), 0, -1)
                    if buf.endswith(s[:n])), default=0)
        self._held = buf[len(buf) - hold:] if hold else ""
        return buf[:len(buf) - hold], False

    def pass_through(self, text: str) -> str:
        """Text no stop string may cut (inside what a grammar holds): with whatever was held back."""
        out, self._held = self._held + text, ""
        return out

    def flush(self, text: str = "") -> str:
        """At the end of a generation: everything still held (it never became a stop string)."""
        out, hit = self.feed(text)
        if hit:
            return out
        out += self._held
        self._held = ""
        return out
