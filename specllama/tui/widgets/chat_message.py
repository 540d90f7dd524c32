"""One message of the conversation.

An answer has two views of the same text, one shown at a time (ctrl+o switches every answer):
- rendered: Markdown with syntax-highlighted code blocks, the default. A chat you use every day is
  read for its code and prose; the side panel still shows the speculation live (acceptance, the
  per-step sparkline) while the answer streams, so nothing about speculation is hidden by default.
- origins: each piece coloured by where its tokens came from (accepted draft, target, bonus), the
  view for watching speculation token by token.
Only the visible view does rendering work while tokens stream: the origin text is kept (cheap,
incremental) and the Markdown catches up with what it missed when it is shown again.

The Markdown view takes new text at most every MARKDOWN_INTERVAL seconds while an answer streams
(a timer brings in what arrived in between; the end of the answer is shown at once). Each update
re-parses the last block and, in a code block, re-highlights all of it: measured with
scripts/measure_tui_overhead.py, the UI thread used 8 % of a core at the 100 ms flush, and on two
cores every bit of it comes out of llama.cpp's time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from markdown_it import MarkdownIt
from textual import events
from textual.containers import Vertical
from textual.content import Content
from textual.geometry import Region
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownFence, MarkdownStream

from specllama.tui.streaming import Segment, plain_text

MARKDOWN_INTERVAL = 0.3  # seconds between Markdown updates of a streaming answer (see above)

# Theme variables, so the colours follow the light and dark themes.
# An accepted draft is coloured by its source (TokenEvent.source): the suffix drafter's (earlier
# text) and the draft model's differ; "draft" is any other drafter's.
ORIGIN_STYLES = {
    "suffix": "$text-success",  # proposed by the suffix drafter and accepted by the target
    "model": "$text-accent",  # proposed by the draft model and accepted by the target
    "draft": "$text-success",  # proposed by another drafter and accepted
    "target": "$text-warning",  # the target's own token where it rejected a draft (or nothing was drafted)
    "bonus": "$text-primary",  # the extra token the target adds when all K drafts were accepted
}
ORIGIN_LABELS = {"suffix": "suffix draft", "model": "model draft",  # accepted drafts, by source
                 "target": "target (its own pick)", "bonus": "bonus (all K accepted)"}


def code_blocks(markdown: str) -> list[str]:
    """The fenced and indented code blocks of a Markdown text, in order."""
    return [t.content for t in MarkdownIt("commonmark").parse(markdown) if t.type in ("fence", "code_block")]


class OriginText(Widget):
    """The text, coloured by origin or plain. A plain Widget rather than a Static: a Static repaints
    all of itself on every update, and a streaming answer only ever changes its last line."""

    DEFAULT_CSS = "OriginText { height: auto; }"

    def __init__(self, segments: list[Segment], *, coloured: bool):
        super().__init__()
        self.segments = segments
        self.coloured = coloured
        self._content = self._styled(segments)

    def _styled(self, segments: list[Segment]) -> Content:
        if not self.coloured:
            return Content(plain_text(segments))
        return Content.assemble(*((text, ORIGIN_STYLES.get(origin, "")) for text, origin in segments))

    @property
    def content(self) -> Content:
        return self._content

    def render(self) -> Content:
        return self._content if self.segments else Content.styled("…", "$text-muted")

    def rebuild(self) -> None:
        self._content = self._styled(self.segments)
        self.refresh(layout=True)

    def appended(self, segments: list[Segment]) -> None:
        """New pieces (already in self.segments) styled once and added, not the whole text restyled.
        Appended text changes only the last line unless it wraps onto new ones, so only that line
        is repainted; a new line needs a layout. On two cores shared with llama.cpp this halves
        what an update costs the UI thread."""
        was_empty = len(self.segments) == len(segments)
        self._content = self._content + self._styled(segments)
        if not self.display:
            return
        width, lines_before = self.content_region.width, self.content_region.height
        if was_empty or not width or self._content.get_height(self.styles, width) != lines_before:
            self.refresh(layout=True)
        else:
            self.refresh(Region(0, lines_before - 1, width, 1))


class ChatMessage(Vertical):
    DEFAULT_CSS = """
    ChatMessage {
        height: auto;
        padding: 0 1;
        margin: 0 1 1 0;
        border: round $primary 50%;
        border-title-color: $text-primary;
    }
    ChatMessage.-assistant {
        border: round $success 40%;
        border-title-color: $text-success;
    }
    ChatMessage.-failed {
        border: round $error;
    }
    ChatMessage Markdown { padding: 0; margin: 0; }
    ChatMessage MarkdownFence { margin: 0 0 1 0; }
    ChatMessage Markdown > *:last-child { margin-bottom: 0; }  /* no blank line above the border */
    """

    def __init__(self, role: str, text: str = "", *, show_origins: bool = False, title: str | None = None,
                 segments: list[Segment] | None = None):
        super().__init__(classes=f"-{role}")
        self.role = role
        self.border_title = title or ("you" if role == "user" else "assistant")
        # Given whole (a question, an answer saved before origins were kept): no origin is known,
        # so none is coloured. A reopened answer brings its saved segments.
        self.segments: list[Segment] = list(segments) if segments else ([(text, "")] if text else [])
        self._show_origins = show_origins or role != "assistant"
        self._origins = OriginText(self.segments, coloured=role == "assistant")
        self._markdown: Markdown | None = Markdown(text) if role == "assistant" else None
        self._stream: MarkdownStream | None = None
        self._rendered_chars = len(text)  # how much of the text the Markdown view has been given
        self._markdown_at = float("-inf")  # when the Markdown view last took text (time.monotonic)
        self._catch_up_timer = None  # a pending catch-up for text that arrived too soon after one

    def compose(self):
        if self._markdown is not None:
            yield self._markdown
        yield self._origins

    def on_mount(self) -> None:
        self._show_view()

    @property
    def text(self) -> str:
        return plain_text(self.segments)

    @property
    def content(self) -> Content:
        """The origin view's content (its spans carry the origin colours)."""
        return self._origins.content

    @property
    def showing_origins(self) -> bool:
        return self._show_origins

    @property
    def markdown(self) -> Markdown | None:
        return self._markdown

    def code_blocks(self) -> list[str]:
        return code_blocks(self.text)

    async def append(self, segments: list[Segment]) -> None:
        """New pieces of a streaming answer."""
        if not segments:
            return
        self.segments.extend(segments)
        self._origins.appended(segments)
        if self._show_origins or self._catch_up_timer is not None:
            return
        wait = self._markdown_at + MARKDOWN_INTERVAL - time.monotonic()
        if wait > 0:
            self._catch_up_timer = self.set_timer(wait, self._timed_catch_up)
        else:
            await self._catch_up_markdown()

    async def _timed_catch_up(self) -> None:
        self._catch_up_timer = None
        if not self._show_origins:
            await self._catch_up_markdown()

    async def _catch_up_markdown(self) -> None:
        if self._markdown is None:
            return
        text = self.text
        if len(text) <= self._rendered_chars:
            return
        # The stream batches fragments that arrive faster than the widget can take them, and the
        # widget parses only from its last complete block: no re-render of the whole answer.
        if self._stream is None:
            self._stream = Markdown.get_stream(self._markdown)
        fragment, self._rendered_chars = text[self._rendered_chars:], len(text)
        self._markdown_at = time.monotonic()
        await self._stream.write(fragment)

    async def finish(self) -> None:
        """The answer ended: the Markdown takes what is still waiting or queued."""
        if self._catch_up_timer is not None:
            self._catch_up_timer.stop()
            self._catch_up_timer = None
        if not self._show_origins:
            await self._catch_up_markdown()
        if self._stream is not None:
            stream, self._stream = self._stream, None
            await stream.stop()

    async def set_show_origins(self, show: bool) -> None:
        if self.role != "assistant" or show == self._show_origins:
            return
        self._show_origins = show
        self._show_view()
        if show:
            self._origins.rebuild()
        else:
            await self._catch_up_markdown()

    def _show_view(self) -> None:
        if self._markdown is not None:
            self._markdown.display = not self._show_origins
        self._origins.display = self._show_origins

    def on_click(self, event: events.Click) -> None:
        """A click on a code block copies it (ctrl+b copies the last one without the mouse)."""
        widget = event.widget
        while widget is not None and widget is not self:
            if isinstance(widget, MarkdownFence):
                self.post_message(self.CopyRequested(widget.code, "code block"))
                return
            widget = widget.parent

    @dataclass
    class CopyRequested(Message):
        text: str
        what: str

    def on_unmount(self) -> None:
        # Removed while streaming (ctrl+n, a reopened conversation): end the Markdown stream's task.
        if self._catch_up_timer is not None:
            self._catch_up_timer.stop()
        if self._stream is not None:
            stream, self._stream = self._stream, None
            self.app.run_worker(stream.stop(), exit_on_error=False)

    def set_status(self, status: str, *, failed: bool = False) -> None:
        """A short line under the message: speed and finish, or why it failed."""
        self.border_subtitle = status
        self.set_class(failed, "-failed")
