"""One streaming parser for every dialect whose calls sit between markers (a table of markers,
dialect.py), fed text in any pieces: thinking, content and whole calls come out the same for every
split of the text, streamed or whole.

How it stays split-invariant: text is handed on only when no marker can begin in it (the longest
tail that could start a marker is held back), and a call is handed on only once its region is
closed (or the answer has ended), then decoded from the whole region's text at once. Whitespace
next to a marker (the template's separators) is dropped; the text's own whitespace is kept.

A region that does not decode (a model writing the markers around something that is not a call) is
given back as the content it was, markers included: never a 500, never a lost word.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specllama.dialects.parts import Reasoning

if TYPE_CHECKING:
    from specllama.dialects.dialect import Dialect, ToolSet

CONTENT, REASONING, CALL = "content", "reasoning", "call"


def partial_tail(text: str, markers) -> int:
    """How many characters at the end of `text` could begin one of `markers`."""
    best = 0
    for marker in markers:
        for n in range(min(len(marker) - 1, len(text)), best, -1):
            if marker.startswith(text[-n:]):
                best = n
                break
    return best


class Scanner:
    """feed(text) -> parts, end(cut) -> parts; a part is content (str), Reasoning or a ToolCall."""

    def __init__(self, dialect: Dialect, tools: ToolSet, thinking: bool = False, parses_tools: bool = True,
                 reasons: bool = True):
        self.d = dialect
        self.tools = tools
        self.parses_tools = parses_tools and bool(dialect.regions)
        self.think = dialect.think if reasons else None
        self.state = REASONING if thinking and self.think else CONTENT
        self.pending = ""
        self.lead = True  # at a segment's start: its leading whitespace is the template's
        self.said = False  # content or a call was handed on (a <think> after that is plain text)
        self.region: tuple[str, str | None] | None = None
        self.gap = ""  # the whitespace before a region's opening
        self.tried = 0  # where in the open region the closings not yet tried begin
        self.bare: bool | None = None if self.parses_tools and dialect.bare is not None else False
        self.calls = 0

    # --- the markers looked for in each state ------------------------------------------------
    def _openers(self) -> list[str]:
        out = [open_ for open_, _ in self.d.regions] if self.parses_tools else []
        if self.think and not self.said:
            out.append(self.think[0])
        return out

    def feed(self, text: str) -> list:
        self.pending += text
        out: list = []
        if self.bare is None and self.state == CONTENT and not self.said:
            lead = self.pending.lstrip()
            if not lead or any(start.startswith(lead) and start != lead for start in self.d.bare_starts):
                return out  # not known yet
            self.bare = lead.startswith(self.d.bare_starts)
        if self.bare:
            return out  # decided at the end
        while True:
            if self.state == CALL:
                found = self._closing()
                if found is None:
                    return out
                at, calls = found
                body, self.pending = self.pending[:at], self.pending[at + len(self.region[1]):]
                out += self._region(body, closed=True, complete=True, calls=calls)
                continue
            if self.lead:
                self.pending = self._lstrip(self.pending)
                if self.calls and self.d.drop_after:  # a stray closing after a call (Qwen3-Coder's bare <function=)
                    for stray in self.d.drop_after:
                        if self.pending.startswith(stray):
                            self.pending = self.pending[len(stray):].lstrip()
                        elif stray.startswith(self.pending):
                            return out
                if not self.pending:
                    return out
            if self.state == REASONING:
                close = self.think[1]
                ends = [close] + ([o for o, _ in self.d.regions] if self.d.calls_end_thinking and self.parses_tools else [])
                found = self._earliest(ends)
                if found is None:
                    return out + self._safe(Reasoning, ends)
                at, marker = found
                thought = self.pending[:at].rstrip()
                self.pending = self.pending[at + len(close):] if marker == close else self.pending[at:]
                if thought:
                    out.append(Reasoning(thought))
                self.state, self.lead, self.said = CONTENT, True, marker != close
                continue
            found = self._earliest(self._openers())
            if found is None:
                return out + self._safe(str, self._openers())
            at, marker = found
            before, self.pending = self.pending[:at], self.pending[at + len(marker):]
            # The template's line break before a marker is not content (given back if no call follows);
            # the spaces of "text <call>" are.
            space = before[len(before.rstrip()):]
            self.gap = space if "\n" in space or (self.think and marker == self.think[0]) else ""
            before = before[:len(before) - len(self.gap)]
            if before:
                out.append(before)
                self.said = True
            self.lead = True
            if self.think and marker == self.think[0] and not self.said:
                self.state = REASONING
            else:
                self.region = next(r for r in self.d.regions if r[0] == marker)
                self.state = CALL

    def end(self, cut: bool = False) -> list:
        """The text is complete. `cut`: it ended at max_tokens (or the context), so an unfinished
        call is not a call: the calls finished before the cut are kept, and the unfinished one is
        dropped, neither a call nor markup in the content (issue 41's rule: the writers' cut_short
        makes the finish reason "length"; canitoolcall accepts it)."""
        out: list = []
        if self.bare:
            calls = self.d.bare(self.pending, self.tools) if not cut else None
            if calls:
                self.calls += len(calls)
                self.pending = ""
                return list(calls)
            self.bare = False
            out += self.feed("")
        if self.state == CALL:
            close = self.region[1]
            at = self.pending.find(close) if close is not None else -1
            if at >= 0:  # closings, none of which ended a call: the first one ends this text, and on
                body, self.pending = self.pending[:at], self.pending[at + len(close):]
                out += self._region(body, closed=True, complete=True, calls=None) + self.feed("")
                return out + self.end(cut)
            out += self._region(self.pending, closed=False, complete=not cut)
        elif self.state == REASONING:
            thought = self.pending.rstrip()
            if thought and not (self.lead and not thought.strip()):
                out.append(Reasoning(thought))
            self.pending = ""
        if self.pending:
            text = self.pending.rstrip() if self.calls or self.lead else self.pending
            if text:
                out.append(text)
        self.pending = ""
        return out

    @property
    def in_thinking(self) -> bool:
        return self.state == REASONING

    # --- helpers -------------------------------------------------------------------------------
    def _lstrip(self, text: str) -> str:
        """A segment's leading whitespace: after a call, only a line break is the template's (the
        spaces of "text <call> more" are the text's); at the answer's or the thinking's start, all."""
        stripped = text.lstrip()
        if self.lead == "newline":
            if "\n" not in text[:len(text) - len(stripped)]:
                if stripped:
                    self.lead = False
                return text
            self.lead = True  # the line break came: what whitespace follows it is the template's too
        return stripped

    def _earliest(self, markers: list[str]) -> tuple[int, str] | None:
        best = None
        for marker in markers:
            at = self.pending.find(marker)
            if at >= 0 and (best is None or at < best[0] or (at == best[0] and len(marker) > len(best[1]))):
                best = (at, marker)
        return best

    def _safe(self, kind, markers: list[str]) -> list:
        """Hand on what no marker can start in, less trailing whitespace (it may be a separator)."""
        hold = partial_tail(self.pending, markers)
        head = self.pending[:len(self.pending) - hold].rstrip()
        if not head:
            return []
        self.pending = self.pending[len(head):]
        self.lead = False
        if kind is str:
            self.said = True
            return [head]
        return [Reasoning(head)]

    def _closing(self) -> tuple[int, list] | None:
        """Where the open region ends: the first closing at which its text decodes to calls (a
        closing inside an argument's string is the argument's text); None while none does."""
        close = self.region[1]
        if close is None:
            return None
        at = self.pending.find(close, self.tried)
        while at >= 0:
            calls = self.d.decode(self.region[0], self.pending[:at], self.tools, True)
            if calls is not None:
                self.tried = 0
                return at, calls
            self.tried = at + 1
            at = self.pending.find(close, self.tried)
        return None

    def _region(self, body: str, closed: bool, complete: bool, calls: list | None | bool = False) -> list:
        """The region's parts. `calls`: already decoded (None: it is not calls); False: decode it."""
        open_, close = self.region
        self.pending = "" if not closed else self.pending
        self.state, self.said, self.tried = CONTENT, True, 0
        if calls is False:
            # An unclosed region that was not cut is decoded as it is: a stop string (parallel_tool_calls
            # false) or the model's end-of-turn may stand where its closing would be.
            # Cut short (max_tokens or the context), what does not decode is a half call: dropped, as
            # neither a call nor content (issue 41: no markup leaks; the finish reason says "length").
            calls = self.d.decode(open_, body, self.tools, complete) if body.strip() else []
        if calls is None:  # not a call after all: the model's text, as it wrote it
            self.lead = False
            return [self.gap + open_ + body + (close if closed and close else "")]
        self.lead = "newline"  # calls, or nothing (an empty region, or one cut short): no text of it is content
        self.calls += len(calls)
        return list(calls)
