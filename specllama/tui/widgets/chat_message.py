"""One message of the conversation; an answer can colour each piece by where its tokens came from."""

from __future__ import annotations

from textual.content import Content
from textual.geometry import Region
from textual.widget import Widget

from specllama.tui.streaming import Segment, plain_text

# Theme variables, so the colours follow the light and dark themes.
ORIGIN_STYLES = {
    "draft": "$text-success",  # proposed by the drafter and accepted by the target
    "target": "$text-warning",  # the target's own token where it rejected a draft (or nothing was drafted)
    "bonus": "$text-primary",  # the extra token the target adds when all K drafts were accepted
}
ORIGIN_LABELS = {"draft": "accepted draft", "target": "target (its own pick)", "bonus": "bonus (all K accepted)"}


class ChatMessage(Widget):
    """A plain Widget rather than a Static: a Static repaints all of itself on every update, and
    a streaming answer only ever changes its last line (or grows a new one)."""

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
    """

    def __init__(self, role: str, text: str = "", *, show_origins: bool = True, title: str | None = None):
        super().__init__(classes=f"-{role}")
        self.role = role
        self.border_title = title or ("you" if role == "user" else "assistant")
        self.segments: list[Segment] = [(text, "target")] if text else []
        self._show_origins = show_origins
        self._content = self._styled(self.segments)

    @property
    def text(self) -> str:
        return plain_text(self.segments)

    def _styled(self, segments: list[Segment]) -> Content:
        if self.role != "assistant" or not self._show_origins:
            return Content(plain_text(segments))
        return Content.assemble(*((text, ORIGIN_STYLES.get(origin, "")) for text, origin in segments))

    @property
    def content(self) -> Content:
        return self._content

    def render(self) -> Content:
        return self._content if self.segments else Content.styled("…", "$text-muted")

    def _rebuild(self) -> None:
        self._content = self._styled(self.segments)
        self.refresh(layout=True)

    def append(self, segments: list[Segment]) -> None:
        """New pieces of a streaming answer: styled once and added, not the whole message restyled.
        Appended text changes only the last line unless it wraps onto new ones, so only that
        line is repainted; a new line needs a layout (the message grows, the chat scrolls). On two
        cores shared with llama.cpp this halves what an update costs the UI thread."""
        if not segments:
            return
        was_empty = not self.segments
        self.segments.extend(segments)
        self._content = self._content + self._styled(segments)
        width, lines_before = self.content_region.width, self.content_region.height
        if was_empty or not width or self._content.get_height(self.styles, width) != lines_before:
            self.refresh(layout=True)
        else:
            self.refresh(Region(0, lines_before - 1, width, 1))

    def set_show_origins(self, show: bool) -> None:
        if show != self._show_origins:
            self._show_origins = show
            self._rebuild()

    def set_status(self, status: str, *, failed: bool = False) -> None:
        """A short line under the message: speed and finish, or why it failed."""
        self.border_subtitle = status
        self.set_class(failed, "-failed")
