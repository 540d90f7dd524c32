"""What the settings keys (drafter, K, temperature, p_min) and the settings screen (ctrl+t) do to
the chat's settings: each change goes to their owner, LiveSettings, which the side panel shows.

A change shows at once and reaches the engine with the next answer: the engine fixes K, the
drafter's role and sampling when an answer starts, so a change in the middle would half apply
(said once per answer). The drafter is kept to one the loaded models offer. No model is reloaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from textual.app import App

from specllama.decoding.request import DRAFTERS
from specllama.tui.conversation import Conversation
from specllama.tui.live_settings import LiveSettings
from specllama.tui.screens import SettingsScreen
from specllama.tui.settings import ChatSettings


class SettingsControls:
    def __init__(self, app: App, live: LiveSettings, *, runtime: Callable[[], Any], busy: Callable[[], bool],
                 conversation: Conversation, defaults_path: Path | None):
        self._app, self._live = app, live
        self._runtime, self._busy = runtime, busy
        self._conversation = conversation
        self._defaults_path = defaults_path  # chat.toml; None: the config folder's
        self._told_pending = False  # "applies from the next answer" said once per answer

    def drafters(self) -> tuple[str, ...]:
        runtime = self._runtime()
        return runtime.drafters if runtime is not None else DRAFTERS

    def open_screen(self) -> None:
        app, runtime = self._app, self._runtime()
        if isinstance(app.screen, SettingsScreen):
            return
        app.push_screen(SettingsScreen(self._live.value, n_ctx=runtime.context_use()[1] if runtime is not None else None,
                                       threads=runtime.threads if runtime is not None else None,
                                       drafters=self.drafters(), defaults_path=self._defaults_path),
                        self._screen_done)

    def _screen_done(self, result: tuple[ChatSettings, Path | None] | None) -> None:
        if result is None:
            return
        settings, saved = result
        if settings.system != self._conversation.system:
            # The new system prompt applies to this conversation from its next answer (the model
            # re-reads the conversation from the start: no KV cache reuse for that one turn).
            self._conversation.system = settings.system
        self._live.wait_for_drafter(None)  # the user's choice now
        self.apply(settings)
        self._app.notify(f"saved as your defaults: {saved}" if saved else "settings applied")

    def next_drafter(self) -> None:
        self._live.wait_for_drafter(None)
        self.apply(self._live.value.next_drafter(self.drafters()))

    def apply(self, new: ChatSettings) -> None:
        self._live.set(new)
        if not self._busy():
            self.fit_drafter()
        elif not self._told_pending:
            self._told_pending = True
            self._app.notify("changes apply from the next answer")

    def fit_drafter(self) -> None:
        if self._runtime() is None:
            return
        refused = self._live.fit(self._runtime().drafters)
        if refused:
            self._app.notify(refused, title="drafter unchanged", severity="error")

    def answer_ended(self) -> None:
        """Changes made while it ran apply now."""
        self._told_pending = False
        self.fit_drafter()
