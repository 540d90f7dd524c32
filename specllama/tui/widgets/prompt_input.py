"""The message box: several lines, grows up to a few, enter sends.

Textual's Input is one line: a pasted multi-line text kept only its first line. A TextArea keeps
pasted newlines; enter is taken for sending, and shift+enter or ctrl+j (what most terminals send
for shift+enter is plain enter, ctrl+j always arrives) insert a newline.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widgets import TextArea

# Keys the chat itself uses (F6, F7 step temperature and p_min; ctrl+y copies the answer): the
# TextArea's own bindings for them (select line, select all, redo) would take them first.
TAKEN_BY_THE_CHAT = {"f6", "f7", "ctrl+y"}


def _without_chat_keys(bindings) -> list[Binding]:
    kept = []
    for b in bindings:
        keys = [k for k in b.key.split(",") if k.strip() not in TAKEN_BY_THE_CHAT]
        if keys:
            kept.append(replace(b, key=",".join(keys)))
    return kept


class PromptInput(TextArea, inherit_bindings=False):
    BINDINGS = _without_chat_keys(TextArea.BINDINGS)
    DEFAULT_CSS = """
    PromptInput {
        height: auto;
        min-height: 3;
        max-height: 8;
        border: tall $border-blurred;
        &:focus { border: tall $border; }
    }
    """

    @dataclass
    class Submitted(Message):
        input: "PromptInput"
        value: str

        @property
        def control(self) -> "PromptInput":
            return self.input

    def __init__(self, placeholder: str = "", id: str | None = None):
        super().__init__(id=id, soft_wrap=True, show_line_numbers=False, tab_behavior="focus",
                         compact=False, highlight_cursor_line=False, placeholder=placeholder)

    @property
    def value(self) -> str:
        return self.text

    @value.setter
    def value(self, text: str) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end)

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.post_message(self.Submitted(self, self.text))
            return
        if event.key in ("shift+enter", "ctrl+j"):
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        await super()._on_key(event)
