"""The chat's saved conversations: the history screen and reopening a conversation with its
settings and models (planned by reopen.py, a pure function; applied here). A part of ChatApp
(app.py) kept in its own file, mixed into it; it uses the app's collaborators (recorder, model
switcher, live settings, view).
"""

from __future__ import annotations

from specllama.tui.history import HistoryUnavailable
from specllama.tui.reopen import plan_reopen
from specllama.tui.screens import HistoryScreen
from specllama.tui.widgets import ChatMessage


class HistoryActions:
    """ChatApp's saved-conversation actions."""

    def _history_off(self, reason: str) -> None:
        self.notify(reason, title="no chat history", severity="warning", timeout=15)

    def _history_settings(self) -> dict:
        values = self.settings.as_dict() | {"system": self.conversation.system}
        # The models as the registry names them (the conversations table keeps their display names),
        # so reopening can load them again; a reopened conversation without it just says who held it.
        refs = self.models.loaded_refs()
        if refs is not None:
            values["models"] = {"target": refs[0], "draft": refs[1]}
        return values

    def action_history(self) -> None:
        if self.history is None:
            self.notify("no chat history this session" if self.recorder.path else "history is off", severity="warning")
            return
        if not isinstance(self.screen, HistoryScreen):
            self.push_screen(HistoryScreen(self.history), self.reopen)

    def action_models(self) -> None:
        self.models.open_picker()

    async def reopen(self, conversation_id: int | None, pinned: frozenset[str] = frozenset()) -> None:
        """A saved conversation on screen again, with its settings and (in the background) its models."""
        if conversation_id is None or self.history is None:
            return
        try:
            info = self.history.conversation(conversation_id)
            stored = self.history.messages(conversation_id)
        except (HistoryUnavailable, KeyError) as e:
            self.notify(f"could not reopen: {e}", severity="error")
            return
        self.action_new_conversation(quiet=True)
        plan = plan_reopen(info, stored, self.settings, self.models.loaded_refs(),
                           self.runtime.target_name if self.runtime is not None else None, pinned)
        self.conversation.system = plan.system
        note = plan.note
        if plan.models is not None:
            coming, said = await self.models.restore(*plan.models)
            note = f"; {said}"
            if coming:
                self.live_settings.wait_for_drafter(plan.settings.drafter)  # restored with its models, not before
                if self.runtime is not None and plan.settings.drafter not in self.runtime.drafters:
                    note += f" (the {plan.settings.drafter} drafter comes with them)"
        self.live_settings.set(plan.settings)
        if not self.busy:
            self.controls.fit_drafter()
        widgets = []
        for m in plan.messages:
            self.conversation.messages.append({"role": m.role, "content": m.content})
            widget = ChatMessage(m.role, m.content, show_origins=self.show_origins and m.role == "assistant",
                                 segments=m.segments)
            if not m.complete:
                widget.set_status("unfinished (the chat ended while it streamed)")
            widgets.append(widget)
            if m.role == "user":
                self.prompt.remember(m.content)
        self.prompt.value = plan.unanswered
        await self.view.mount_all(widgets)
        self.prompt.focus()
        self.recorder.start(conversation_id, last_turn=plan.last_turn)
        self.notify(f"reopened “{plan.title}”{note}", timeout=10 if note else 5)
