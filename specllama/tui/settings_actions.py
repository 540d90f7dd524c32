"""The chat's settings while it runs: the settings screen (F11) and the keys that step one value
(F2 drafter, F3/F4 K, F5/F6 temperature, F7/F8 p_min), and keeping the drafter to one the loaded
models offer.

ChatApp mixes this in, as it does ModelSwitching and SavedConversations, to keep app.py to the chat
itself; the values and their steps are settings.py's, the screen screens/settings.py's.
"""

from __future__ import annotations

from dataclasses import replace

from specllama.decoding.request import DRAFTERS
from specllama.tui.screens import SettingsScreen
from specllama.tui.settings import ChatSettings
from specllama.tui.widgets import StatsPanel


class SettingsControls:
    def action_settings(self) -> None:
        if isinstance(self.screen, SettingsScreen):
            return
        n_ctx = self.runtime.context_use()[1] if self.runtime is not None else None
        self.push_screen(SettingsScreen(self.settings, n_ctx=n_ctx,
                                        threads=self.runtime.threads if self.runtime is not None else None,
                                        drafters=self._drafters_available()), self._settings_done)

    def _settings_done(self, result) -> None:
        if result is None:
            return
        settings, saved = result
        if settings.system != self.conversation.system:
            # The new system prompt applies to this conversation from its next answer (the model
            # re-reads the conversation from the start: no KV cache reuse for that one turn).
            self.conversation.system = settings.system
        self._wanted_drafter = None  # the user's choice now
        self._apply_settings(settings)
        self.notify(f"saved as your defaults: {saved}" if saved else "settings applied")

    def _drafters_available(self) -> tuple[str, ...]:
        return self.runtime.drafters if self.runtime is not None else DRAFTERS

    def action_next_drafter(self) -> None:
        self._wanted_drafter = None
        self._apply_settings(self.settings.next_drafter(self._drafters_available()))

    def action_step_k(self, delta: int) -> None:
        self._apply_settings(self.settings.step_k(delta))

    def action_step_temperature(self, steps: int) -> None:
        self._apply_settings(self.settings.step_temperature(steps))

    def action_step_p_min(self, steps: int) -> None:
        self._apply_settings(self.settings.step_p_min(steps))

    def _apply_settings(self, new: ChatSettings) -> None:
        """Settings change at once on screen and reach the engine with the next answer: the engine
        fixes K, the drafter's role and sampling when an answer starts, so a change in the middle
        would half apply. No model is reloaded either way."""
        self.settings = new
        self.query_one(StatsPanel).show_settings(new)
        if not self.busy:
            self._sync_drafter()
        elif not self._told_pending:
            self._told_pending = True
            self.notify("changes apply from the next answer")

    def _sync_drafter(self) -> None:
        """The drafter travels with each request; this only keeps the choice to one the loaded
        models offer (the model drafter needs a draft model), saying so when it cannot."""
        if self.runtime is None:
            return
        if self._wanted_drafter is not None and self._wanted_drafter in self.runtime.drafters:
            # The models a reopened conversation was held with are in: its drafter comes back.
            self.settings, self._wanted_drafter = replace(self.settings, drafter=self._wanted_drafter), None
            self.query_one(StatsPanel).show_settings(self.settings)
            return
        if self.settings.drafter in self.runtime.drafters:
            return
        wanted = self.settings.drafter
        self.settings = replace(self.settings, drafter=self.runtime.drafters[0])
        if self._wanted_drafter is not None:  # its models are loading; the reopen notice said so
            self.query_one(StatsPanel).show_settings(self.settings)
            return
        self.notify(f"the {wanted} drafter is not available (no draft model loaded): "
                    f"using {self.settings.drafter}", title="drafter unchanged", severity="error")
        self.query_one(StatsPanel).show_settings(self.settings)
