"""The frame every screen over the chat shares: centred, one bordered container on the surface.
Each screen sizes its container (width, height) in its own CSS; Textual's type selectors match
subclasses, so `Dialog` rules reach them all."""

from __future__ import annotations

from textual.screen import ModalScreen, ScreenResultType


class Dialog(ModalScreen[ScreenResultType]):
    DEFAULT_CSS = """
    Dialog { align: center middle; }
    Dialog > * {
        padding: 0 1;
        border: round $accent;
        background: $surface;
    }
    """
