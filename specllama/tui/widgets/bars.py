"""A one-line title and a one-line key bar, each a single widget.

Textual's Header and Footer are built from a dozen small widgets, and every layout (the streaming
answer grows a line, the chat scrolls) repaints all of them: measured in a pseudo-terminal, they
were a fifth of the UI thread's work while tokens stream, taken from llama.cpp's two cores.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.content import Content
from textual.widgets import Static


class TitleBar(Static):
    DEFAULT_CSS = """
    TitleBar {
        dock: top;
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $foreground;
        text-style: bold;
    }
    """

    def show(self, title: str, detail: str = "", *, failed: bool = False) -> None:
        style = "$text-error" if failed else "$text-muted"
        self.update(Content.assemble(("◆ ", "$text-accent"), title, (f"  {detail}" if detail else "", style)))


class KeyBar(Static):
    """The bindings marked `show`, each clickable like the Footer's."""

    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $text-muted;
    }
    """

    def __init__(self, bindings: list[Binding], hints_after: dict[str, tuple[str, str]] | None = None):
        """`hints_after`: (key, what) shown after the binding of an action, for keys that are no
        binding of the app (↑ in the input box)."""
        super().__init__()
        self.bindings_shown = [b for b in bindings if b.show]
        self.hints_after = hints_after or {}

    def on_mount(self) -> None:
        parts: list[tuple[str, str] | str] = []
        for b in self.bindings_shown:
            key = b.key_display or b.key.split(",")[0].replace("ctrl+", "^").replace("escape", "esc")
            # `@click` runs the binding's action, so the bar works with a mouse too.
            parts += [(key, f"bold $text-accent @click=app.{b.action}"), (f" {b.description}  ", f"@click=app.{b.action}")]
            if b.action in self.hints_after:
                hint_key, what = self.hints_after[b.action]
                parts += [(hint_key, "bold $text-accent"), f" {what}  "]
        self.update(Content.assemble(*parts))
