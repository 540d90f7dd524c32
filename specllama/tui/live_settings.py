"""The one owner of the chat's settings while it runs: every change goes through `set`, and is
published on `changed` (a Textual Signal) to whoever shows them (the side panel subscribes).

It also keeps the drafter to one the loaded models offer (the model drafter needs a draft model),
and remembers a reopened conversation's drafter while the models that offer it load
(`wait_for_drafter`): that drafter is restored with its models, not refused before they come.
A change reaches the engine with the next answer (the engine fixes K, the drafter's role and
sampling when an answer starts); none reloads a model.
"""

from __future__ import annotations

from dataclasses import replace

from textual.dom import DOMNode
from textual.signal import Signal

from specllama.tui.settings import ChatSettings


class LiveSettings:
    def __init__(self, owner: DOMNode, initial: ChatSettings):
        self.value = initial
        self.changed: Signal[ChatSettings] = Signal(owner, "settings-changed")
        self._wanted_drafter: str | None = None  # a reopened conversation's, until its models are in

    def set(self, new: ChatSettings) -> None:
        self.value = new
        self.changed.publish(new)

    def wait_for_drafter(self, drafter: str | None) -> None:
        """Restore `drafter` once loaded models offer it (None: stop waiting)."""
        self._wanted_drafter = drafter

    def fit(self, drafters: tuple[str, ...]) -> str | None:
        """Keeps the drafter to one of `drafters` (the loaded models'); returns what to tell the
        user when the chosen one had to give way, None when nothing needs saying."""
        wanted = self._wanted_drafter
        if wanted is not None and wanted in drafters:  # the models it waited for are in
            self._wanted_drafter = None
            if wanted != self.value.drafter:
                self.set(replace(self.value, drafter=wanted))
            return None
        if self.value.drafter in drafters:
            return None
        refused = self.value.drafter
        self.set(replace(self.value, drafter=drafters[0]))
        if wanted is not None:  # its models are loading; the reopen notice said so
            return None
        return (f"the {refused} drafter is not available (no draft model loaded): "
                f"using {self.value.drafter}")
