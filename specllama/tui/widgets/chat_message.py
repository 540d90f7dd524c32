"""One message of the conversation.

An answer has two views of the same text, one shown at a time (ctrl+o switches every answer):
- rendered: Markdown with syntax-highlighted code blocks, the default. A chat you use every day is
  read for its code and prose; the side panel still shows the speculation live (acceptance, the
  per-step sparkline) while the answer streams, so nothing about speculation is hidden by default.
- origins: each piece coloured by where its tokens came from (accepted draft, target, bonus), the
  view for watching speculation token by token.
Only the visible view does rendering work while tokens stream: the origin text is kept (cheap,
incremental) and the Markdown catches up with what it missed when it is shown again.

While an answer streams, `add` only keeps the new text; `show_new` paints it, called by the app at
the cadence that also repaints the side panel (cadence.py says why). The Markdown view appends to
the Markdown widget (Textual's streaming API: only the last block is parsed again) and, in a code
block, re-highlights that block.
"""

from __future__ import annotations

from dataclasses import dataclass

from markdown_it import MarkdownIt
from textual import events
from textual.containers import Vertical
from textual.content import Content
from textual.geometry import Region
from textual.highlight import highlight
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownFence

from specllama.tui.streaming import THINKING, Segment, plain_text

# Each source of tokens has a colour and a mark of its own, so the live view shows which source
# paid: theme variables, so the colours follow the light and dark themes (their $text-accent and
# $text-warning are one colour in textual-dark and textual-light: the draft model and the target
# once looked alike), and a text style for each draft source, so they stay apart without colour
# (NO_COLOR, where Textual renders in greys). tests/unit/test_origin_styles.py checks both on every theme.
# An accepted draft is coloured by its source (TokenEvent.source); "draft" is any other drafter's.
ORIGIN_STYLES = {
    "suffix": "$text-success underline",  # proposed by the suffix drafter (earlier text), accepted
    "model": "$text-primary bold",  # proposed by the draft model, accepted
    "mtp": "$secondary bold underline",  # proposed by the target's own MTP head, accepted
    "grammar": "$text-error italic",  # forced by a grammar (response_format, tools): the only token allowed
    "draft": "$text-success underline",  # proposed by another drafter, accepted
    "target": "$foreground",  # the target's own pick where it rejected a draft (or nothing was drafted)
    "bonus": "$text-warning",  # the target's extra token after every draft was accepted
}
# What the legends say of each, and its mark without colour.
ORIGIN_LABELS = {"suffix": ("suffix draft", "underlined"), "model": ("model draft", "bold"),
                 "mtp": ("mtp draft", "bold underlined"),
                 "grammar": ("grammar", "italic"), "target": ("target", "plain"),
                 "bonus": ("bonus", "plain, after all K drafts accepted")}


# The languages local code models answer in most. pygments builds a lexer's tables the first time
# its language is highlighted (python 35 ms here, these 15 in all ~140 ms).
WARM_LANGUAGES = ("python", "bash", "javascript", "typescript", "json", "c", "cpp", "rust", "go", "java", "sql",
                  "html", "yaml", "toml", "text")


def warm_highlighter() -> None:
    """Builds those tables before the first answer streams (called by the loading thread, before the
    models load), so the first code block does not take them out of llama.cpp's time."""
    for language in WARM_LANGUAGES:
        highlight("x = 1\n", language=language)


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
        self._unshown = False  # text appended but not painted yet
        self._shown_lines = 0  # the height painted last (0: not painted, or a full layout is due)

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
        self._unshown, self._shown_lines = False, 0
        self.refresh(layout=True)

    def appended(self, segments: list[Segment]) -> None:
        """New pieces (already in self.segments) styled once and added, not the whole text restyled."""
        self._content = self._content + self._styled(segments)
        self._unshown = True

    def show_new(self) -> None:
        """Paint what `appended` added. Appended text changes only the last line unless it wraps
        onto new ones, so only that line is repainted; new lines need a layout. On two cores shared
        with llama.cpp this halves what an update costs the UI thread."""
        if not self._unshown or not self.display:
            return
        self._unshown = False
        width = self.content_region.width
        lines = self._content.get_height(self.styles, width) if width else 0
        if not self._shown_lines or lines != self._shown_lines:
            self._shown_lines = lines
            self.refresh(layout=True)
        else:
            self.refresh(Region(0, lines - 1, width, 1))


class ThinkingText(Widget):
    """A thinking model's thinking, above its answer: dimmed, and folded to one line unless shown
    (the chat's `h` toggles every answer's). Never part of the answer's text (copied, saved, sent back)."""

    DEFAULT_CSS = "ThinkingText { height: auto; color: $text-muted; text-style: italic; margin: 0 0 1 0; }"

    def __init__(self, shown: bool):
        super().__init__()
        self.text = ""
        self.shown = shown
        self.display = False

    def add(self, text: str) -> None:
        self.text += text
        self.display = True
        self.refresh(layout=True)

    def show(self, shown: bool) -> None:
        self.shown = shown
        self.refresh(layout=True)

    def render(self) -> Content:
        if self.shown:
            return Content("▾ thinking\n" + self.text.strip())
        return Content(f"▸ thinking ({len(self.text.split())} words; h shows it)")


class ChatMessage(Vertical, can_focus=True):
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
    ChatMessage:focus {  /* selected with the keyboard (tab, up / down) to be copied */
        border: double $accent;
        background-tint: $foreground 5%;
    }
    ChatMessage Markdown { padding: 0; margin: 0; }
    ChatMessage MarkdownFence { margin: 0 0 1 0; }
    ChatMessage Markdown > *:last-child { margin-bottom: 0; }  /* no blank line above the border */
    """

    def __init__(self, role: str, text: str = "", *, show_origins: bool = False, title: str | None = None,
                 segments: list[Segment] | None = None, show_thinking: bool = False):
        super().__init__(classes=f"-{role}")
        self.role = role
        self.border_title = title or ("you" if role == "user" else "assistant")
        # Given whole (a question, an answer saved before origins were kept): no origin is known,
        # so none is coloured. A reopened answer brings its saved segments.
        self.segments: list[Segment] = list(segments) if segments else ([(text, "")] if text else [])
        self._show_origins = show_origins or role != "assistant"
        self._origins = OriginText(self.segments, coloured=role == "assistant")
        self._markdown: Markdown | None = Markdown(text) if role == "assistant" else None
        self._rendered_chars = len(text)  # how much of the text the Markdown view has been given
        self.thinking = ThinkingText(show_thinking)

    def compose(self):
        yield self.thinking
        if self._markdown is not None:
            yield self._markdown
        yield self._origins

    def on_mount(self) -> None:
        self._show_view()

    @property
    def text(self) -> str:
        return plain_text(self.segments)

    @property
    def role_label(self) -> str:
        return "your" if self.role == "user" else "assistant"

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

    def add(self, segments: list[Segment]) -> None:
        """New pieces of a streaming answer, kept; `show_new` paints them. Thinking goes to its own
        folded text, never into the answer's."""
        thought = "".join(text for text, origin in segments if origin == THINKING)
        if thought:
            self.thinking.add(thought)
        segments = [segment for segment in segments if segment[1] != THINKING]
        if segments:
            self.segments.extend(segments)
            self._origins.appended(segments)

    async def show_new(self) -> None:
        """Paint what `add` brought, in the view that is shown (the other catches up when shown)."""
        if self._show_origins:
            self._origins.show_new()
        else:
            await self._catch_up_markdown()

    async def _catch_up_markdown(self) -> None:
        if self._markdown is None:
            return
        text = self.text
        if len(text) <= self._rendered_chars:
            return
        # The widget parses only from its last complete block: no re-render of the whole answer.
        fragment, self._rendered_chars = text[self._rendered_chars:], len(text)
        await self._markdown.append(fragment)

    async def finish(self) -> None:
        """The answer ended: paint what is still waiting."""
        await self.show_new()

    async def set_show_origins(self, show: bool) -> None:
        if self.role != "assistant" or show == self._show_origins:
            return
        self._show_origins = show
        self._show_view()
        if show:
            self._origins.rebuild()  # everything appended so far, painted in one layout
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

    def set_status(self, status: str, *, failed: bool = False) -> None:
        """A short line under the message: speed and finish, or why it failed."""
        self.border_subtitle = status
        self.set_class(failed, "-failed")
