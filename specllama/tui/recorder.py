"""The chat's history as it happens: which saved conversation the screen is, the rows of the turn
in flight, and the rule that a failing database turns history off for the session, said once,
while the chat itself goes on."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from specllama.tui.history import History, HistoryUnavailable, origin_runs, title_for


class ConversationRecorder:
    def __init__(self, path: Path | None, warn: Callable[[str], None]):
        self.path = path  # None: no history (tests); `specllama chat` passes one
        self.history: History | None = None
        self._warn = warn
        self.conversation_id: int | None = None  # its row, once the first message is sent
        self._question_row: int | None = None  # the rows of the turn in flight
        self._answer_row: int | None = None
        self._last_turn: tuple[int | None, int] | None = None  # the rows of the last answered turn

    def open(self) -> None:
        if self.path is None:
            return
        try:
            self.history = History(self.path)
        except HistoryUnavailable as e:
            self._warn(str(e))

    def _write(self, write: Callable[[History], object]) -> None:
        if self.history is None:
            return
        try:
            write(self.history)
        except HistoryUnavailable as e:
            self.history = None
            self._warn(str(e))

    def save_question(self, text: str, target: str, draft: str | None, settings: dict) -> None:
        def write(history: History) -> None:
            if self.conversation_id is None:
                self.conversation_id = history.new_conversation(title_for(text), target, draft, settings)
            else:
                history.set_settings(self.conversation_id, settings, target, draft)
            self._question_row = history.add_message(self.conversation_id, "user", text)
            self._answer_row = history.add_message(self.conversation_id, "assistant", "", complete=False)
        self._write(write)

    def save_answer(self, text: str, complete: bool, segments=None) -> None:
        """Called at every flush (a kill loses at most the last one) and once complete; `segments`
        ((text, origin) pieces) keeps the answer's origin colours for when it is reopened."""
        if self._answer_row is not None:
            row = self._answer_row
            runs = origin_runs(segments) if segments is not None else None
            self._write(lambda history: history.update_message(row, text, complete, runs))
            if complete:
                self._last_turn = (self._question_row, row)
                self._question_row = self._answer_row = None

    def forget_turn(self) -> None:
        """A failed turn leaves the saved conversation as it leaves the on-screen one."""
        rows = [r for r in (self._question_row, self._answer_row) if r is not None]
        self._question_row = self._answer_row = None
        self._write(lambda history: [history.delete_message(r) for r in rows])

    def redo_answer(self, target: str, draft: str | None, settings: dict) -> None:
        """Regenerating: the last answer's row is written again by the new answer (it replaces the
        old one, on screen and here); the conversation takes the settings it is regenerated with."""
        if self._last_turn is None:
            return
        self._question_row, self._answer_row = self._last_turn
        self._last_turn = None
        row, conversation = self._answer_row, self.conversation_id

        def write(history: History) -> None:
            history.update_message(row, "", complete=False)
            if conversation is not None:
                history.set_settings(conversation, settings, target, draft)
        self._write(write)

    def forget_last_turn(self) -> None:
        """Editing the last question: its turn leaves the saved conversation (resent, it is saved again)."""
        rows = [r for r in (self._last_turn or ()) if r is not None]
        self._last_turn = None
        self._write(lambda history: [history.delete_message(r) for r in rows])

    def close(self) -> None:
        if self.history is not None:
            self.history.close()
            self.history = None

    def start(self, conversation_id: int | None = None, last_turn: tuple[int, int] | None = None) -> None:
        """A new conversation (None: saved with its first message), or a reopened one (`last_turn`:
        the rows of its last answered turn)."""
        self.conversation_id, self._question_row, self._answer_row = conversation_id, None, None
        self._last_turn = last_turn
