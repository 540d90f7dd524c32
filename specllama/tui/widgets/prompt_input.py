"""The message box: several lines, grows up to a few, enter sends.

Textual's Input is one line: a pasted multi-line text kept only its first line. A TextArea keeps
pasted newlines; enter is taken for sending, and shift+enter or ctrl+j (what most terminals send
for shift+enter is plain enter, ctrl+j always arrives) insert a newline. ↑ on the first line and
↓ on the last recall earlier prompts (recall.py); elsewhere they move the cursor. tab selects the
last message (to copy it) rather than moving the focus around.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widgets import TextArea

from specllama.tui.recall import Recall

# Keys the chat itself uses (F6, F7 step temperature and p_min; ctrl+y copies the answer, ctrl+e
# edits the last question): the TextArea's own bindings for them (select line, select all, redo,
# end of line: the end key still does that) would take them first.
TAKEN_BY_THE_CHAT = {"f6", "f7", "ctrl+y", "ctrl+e"}


def _without_chat_keys(bindings) -> list[Binding]:
    kept = []
    for b in bindings:
        keys = [k for k in b.key.split(",") if k.strip() not in TAKEN_BY_THE_CHAT]
        if keys:
            kept.append(replace(b, key=",".join(keys)))
    return kept


class PromptInput(TextArea, inherit_bindings=False):
    BINDINGS = _without_chat_keys(TextArea.BINDINGS) + [
        Binding("tab", "app.select_messages", "select a message", show=False)]
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
        self.recall = Recall()

    def remember(self, text: str) -> None:
        """A prompt sent (or set aside): ↑ brings it back."""
        self.recall.remember(text)

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
        if event.key in ("up", "down") and self._recalled(event.key):
            event.stop()
            event.prevent_default()
            return
        if event.key in ("shift+enter", "ctrl+j"):
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        await super()._on_key(event)

    def _recalled(self, key: str) -> bool:
        """↑ on the first line, ↓ on the last: an earlier (later) prompt in the box."""
        row = self.cursor_location[0]
        if key == "up" and row == 0:
            text = self.recall.back(self.text)
        elif key == "down" and row == self.document.line_count - 1:
            text = self.recall.forward()
        else:
            return False
        if text is None:
            return False
        self.value = text
        return True
