"""The help screen: every key binding, written from the app's own BINDINGS so it cannot go stale."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from specllama.tui.screens.dialog import Dialog
from specllama.tui.widgets.chat_message import ORIGIN_LABELS, ORIGIN_STYLES

ABOUT = ("The draft proposes K tokens, the target checks them in one decode and keeps the longest "
         "prefix it agrees with plus one token of its own: greedy answers are exactly the target's.")


def key_label(key: str) -> str:
    return " / ".join(k.strip().replace("escape", "esc") for k in key.split(","))


class HelpScreen(Dialog[None]):
    BINDINGS = [Binding("escape,f1,q,question_mark", "dismiss", "close help")]

    DEFAULT_CSS = """
    HelpScreen > VerticalScroll {
        width: 72;
        height: auto;
        max-height: 90%;
        padding: 0 2;
    }
    HelpScreen .heading { color: $text-accent; text-style: bold; margin-top: 1; }
    HelpScreen .closing { color: $text-muted; }
    HelpScreen Static { height: auto; }
    """

    def __init__(self, bindings: list[Binding]):
        super().__init__()
        self.bindings_shown = bindings

    def compose(self) -> ComposeResult:
        with VerticalScroll() as box:
            box.border_title = "specllama chat: keys"
            yield Static(self._keys())
            yield Static("colours", classes="heading")
            yield Static(self._legend())
            yield Static("how it works", classes="heading")
            yield Static(Content(ABOUT))
            yield Static(Content.styled("Changes made while an answer streams apply from the next one.\n"
                                        "esc, F1 or q closes this screen", "$text-muted"), classes="closing")

    def _keys(self) -> Content:
        rows: list[tuple[str, str] | str] = [("enter".ljust(16), "$text-accent"), "send the message",
                                             ("\n" + "ctrl+j".ljust(16), "$text-accent"), "new line in the message"]
        for b in self.bindings_shown:
            # The footer shows the short description; the tooltip, when given, says more.
            rows += [("\n" + key_label(b.key).ljust(16), "$text-accent"), b.tooltip or b.description]
        return Content.assemble(*rows)

    @staticmethod
    def _legend() -> Content:
        parts: list[tuple[str, str] | str] = []
        for i, (origin, label) in enumerate(ORIGIN_LABELS.items()):
            parts += [(("\n" if i else "") + "■ ", ORIGIN_STYLES[origin]), label]
        return Content.assemble(*parts)
