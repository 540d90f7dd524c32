"""The help screen: every key binding, written from the app's own BINDINGS so it cannot go stale."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from specllama.tui.screens.dialog import Dialog
from specllama.tui.widgets.chat_message import ORIGIN_LABELS, ORIGIN_STYLES

KEY_WIDTH, ALIAS_WIDTH = 14, 7
ABOUT = ("The draft proposes K tokens, the target checks them in one decode and keeps the longest "
         "prefix it agrees with plus one token of its own: greedy answers are exactly the target's.")


def key_label(key: str) -> str:
    return " / ".join(k.strip().replace("escape", "esc") for k in key.split(","))


def is_function_key(key: str) -> bool:
    return key.startswith("f") and key[1:].isdigit()


def key_columns(key: str) -> tuple[str, str]:
    """(the keys every terminal passes, the F-key aliases) of a binding."""
    keys = [k.strip() for k in key.split(",")]
    return (key_label(",".join(k for k in keys if not is_function_key(k))),
            " ".join(k for k in keys if is_function_key(k)))


# Typing keys that are not bindings: the input box's own.
INPUT_KEYS = [("enter", "", "send the message"), ("ctrl+j", "", "new line in the message"),
              ("↑ / ↓", "", "earlier prompts (on the input's first / last line)")]
PLAIN_NOTE = ("Single letters act while a message is selected (tab), not while typing. ctrl+p lists "
              "every action, and the themes.")


class HelpScreen(Dialog[None]):
    BINDINGS = [Binding("escape,f1,ctrl+g,q,question_mark", "dismiss", "close help")]

    DEFAULT_CSS = """
    HelpScreen > VerticalScroll {
        width: 84;
        max-width: 100%;
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
                                        "esc, ctrl+g or q closes this screen", "$text-muted"), classes="closing")

    def _keys(self) -> Content:
        # The footer shows the short description; the tooltip, when given, says more.
        rows = INPUT_KEYS + [(*key_columns(b.key), b.tooltip or b.description) for b in self.bindings_shown]
        parts: list[tuple[str, str] | str] = [("key".ljust(KEY_WIDTH) + "F-key".ljust(ALIAS_WIDTH) + "what", "bold $text-muted")]
        for key, alias, what in rows:
            parts += [("\n" + key.ljust(KEY_WIDTH), "$text-accent"), (alias.ljust(ALIAS_WIDTH), "$text-muted"), what]
        parts.append(("\n" + PLAIN_NOTE, "$text-muted"))
        return Content.assemble(*parts)

    @staticmethod
    def _legend() -> Content:
        """Each source's name in its own style and its mark without colour (NO_COLOR): the draft
        sources on one line, the target's own tokens on the next."""
        parts: list[tuple[str, str] | str] = []
        for origin, (label, mark) in ORIGIN_LABELS.items():
            parts += [(label, ORIGIN_STYLES[origin]), (f" ({mark})", "$text-muted"),
                      "\n" if origin == "grammar" else "   "]
        return Content.assemble(*parts).rstrip()
