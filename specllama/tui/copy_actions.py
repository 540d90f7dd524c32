"""The chat's copy and selection keys (the last answer, its last code block, a selected message):
a part of ChatApp (app.py) kept in its own file, mixed into it. It uses the app's conversation,
view, prompt and notifications.
"""

from __future__ import annotations

from specllama.tui.clipboard import copy_text
from specllama.tui.widgets import ChatMessage, ConversationView


class CopyActions:
    """ChatApp's copy and selection actions (Textual finds actions and message handlers on any
    class of the app's MRO)."""

    def action_copy_answer(self) -> None:
        answer = self.conversation.last_answer
        if not answer:
            self.notify("no answer to copy yet", severity="warning")
            return
        how = copy_text(answer, self.copy_to_clipboard)
        self.notify(f"last answer ({len(answer)} characters) {how}")

    def action_copy_code(self) -> None:
        answers = [m for m in self.view.messages if m.role == "assistant" and m.text]
        blocks = answers[-1].code_blocks() if answers else []
        if not blocks:
            self.notify("the last answer has no code block", severity="warning")
            return
        self._copy(blocks[-1], "code block")

    def action_select_messages(self) -> None:
        if not self.view.select_last():
            self.notify("no message to select yet", severity="warning")

    def on_conversation_view_leave(self, message: ConversationView.Leave) -> None:
        self.prompt.focus()

    def on_chat_message_copy_requested(self, message: ChatMessage.CopyRequested) -> None:
        self._copy(message.text, message.what)

    def _copy(self, text: str, what: str) -> None:
        how = copy_text(text, self.copy_to_clipboard)
        lines = text.rstrip("\n").count("\n") + 1
        self.notify(f"{what} ({lines} line{'s' * (lines != 1)}) {how}")
