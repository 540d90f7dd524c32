"""The chat's saved conversations (ctrl+l / F10): the history screen, and reopening one with its
settings, its models (restored in the background by model_swap.py) and its messages.

ChatApp mixes this in, as it does ModelSwitching, to keep app.py to the chat itself; saving as the
chat goes is recorder.py's, the SQLite file history.py's.
"""

from __future__ import annotations

from specllama.errors import SpecllamaError
from specllama.tui.history import History, HistoryUnavailable
from specllama.tui.screens import HistoryScreen
from specllama.tui.settings import ChatSettings
from specllama.tui.widgets import ChatMessage, PromptInput


class SavedConversations:
    @property
    def history(self) -> History | None:
        return self.recorder.history

    def _history_off(self, reason: str) -> None:
        self.notify(reason, title="no chat history", severity="warning", timeout=15)

    def _history_settings(self) -> dict:
        values = self.settings.as_dict() | {"system": self.conversation.system}
        # The models as the registry names them (the conversations table keeps their display names),
        # so reopening can load them again; a reopened conversation without it just says who held it.
        refs = self.loaded_refs()
        if refs is not None:
            values["models"] = {"target": refs[0], "draft": refs[1]}
        return values

    def action_history(self) -> None:
        if self.history is None:
            self.notify("no chat history this session" if self.recorder.path else "history is off", severity="warning")
            return
        if not isinstance(self.screen, HistoryScreen):
            self.push_screen(HistoryScreen(self.history), self._reopen)

    async def _reopen(self, conversation_id: int | None) -> None:
        if conversation_id is None or self.history is None:
            return
        try:
            info = self.history.conversation(conversation_id)
            stored = self.history.messages(conversation_id)
        except (HistoryUnavailable, KeyError) as e:
            self.notify(f"could not reopen: {e}", severity="error")
            return
        self.action_new_conversation(quiet=True)
        try:
            settings = ChatSettings.from_dict(info.settings, base=self.settings)
        except SpecllamaError:  # a value this version refuses: keep the current settings
            settings = self.settings
        self.conversation.system = info.settings.get("system")
        note = ""
        saved_models = info.settings.get("models")
        if isinstance(saved_models, dict) and isinstance(saved_models.get("target"), str):
            wanted = (saved_models["target"], saved_models.get("draft"))
            if wanted != self.loaded_refs():
                coming, said = await self.restore_models(*wanted)
                note = f"; {said}"
                if coming:
                    self._wanted_drafter = settings.drafter  # restored with its models, not before
                    if self.runtime is not None and settings.drafter not in self.runtime.drafters:
                        note += f" (the {settings.drafter} drafter comes with them)"
        else:  # saved before conversations kept their models' registry names
            loaded = self.runtime.target_name if self.runtime is not None else None
            if loaded and info.target and info.target != loaded:
                note = f" (held with {info.target}; now {loaded})"
        self._apply_settings(settings)
        widgets = []
        for m in stored:
            if m.role in ("user", "assistant") and (m.content or m.role == "user"):
                self.conversation.messages.append({"role": m.role, "content": m.content})
                widget = ChatMessage(m.role, m.content, show_origins=self.show_origins and m.role == "assistant",
                                     segments=m.segments())
                if not m.complete:
                    widget.set_status("unfinished (the chat ended while it streamed)")
                widgets.append(widget)
        if self.conversation.messages and self.conversation.messages[-1]["role"] == "user":
            self.conversation.messages.pop()  # a question with no answer: back to the box to resend
            widgets.pop()
            self.query_one("#prompt", PromptInput).value = stored[-1].content if stored[-1].role == "user" else ""
        await self.query_one("#conversation").mount_all(widgets)
        self.recorder.start(conversation_id)
        self.notify(f"reopened “{info.title}”{note}", timeout=10 if note else 5)
