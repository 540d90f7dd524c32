"""Reopening a saved conversation, planned without a widget: what its settings, system prompt,
messages and models become. `plan_reopen` is a pure function of what the history holds and what is
loaded now; the app applies the plan (mounts the messages, asks the model switcher for the models).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specllama.errors import SpecllamaError
from specllama.tui.history import ConversationInfo, StoredMessage
from specllama.tui.settings import ChatSettings
from specllama.tui.streaming import Segment


@dataclass(frozen=True)
class ShownMessage:
    id: int  # its row in the history
    role: str
    content: str
    segments: list[Segment]
    complete: bool


@dataclass(frozen=True)
class ReopenPlan:
    title: str
    settings: ChatSettings  # the conversation's, or the current ones where this version refuses them
    system: str | None
    messages: list[ShownMessage] = field(default_factory=list)  # answered turns, oldest first
    unanswered: str = ""  # a last question with no answer: back in the input box to resend
    models: tuple[str, str | None] | None = None  # registry names to load; None: keep the loaded ones
    note: str = ""  # added to the reopen notice

    @property
    def last_turn(self) -> tuple[int, int] | None:
        """The rows of the last answered turn (question, answer): what regenerate or edit rewrites."""
        if len(self.messages) >= 2 and (self.messages[-2].role, self.messages[-1].role) == ("user", "assistant"):
            return self.messages[-2].id, self.messages[-1].id
        return None


def plan_reopen(info: ConversationInfo, stored: list[StoredMessage], current: ChatSettings,
                loaded_refs: tuple[str, str | None] | None, loaded_target: str | None,
                pinned: frozenset[str] = frozenset()) -> ReopenPlan:
    """`loaded_refs`: the loaded models' registry names (None: not known); `loaded_target`: the
    loaded target's display name, compared with conversations saved before registry names were;
    `pinned`: settings fields (and "models") the command line set, which the conversation's own
    do not replace (`chat --continue --drafter none`: the flag wins)."""
    try:
        settings = ChatSettings.from_dict({k: v for k, v in info.settings.items() if k not in pinned}, base=current)
    except SpecllamaError:  # a value this version refuses: keep the current settings
        settings = current
    models, note = None, ""
    saved_models = info.settings.get("models")
    if "models" in pinned:
        pass  # the command line named the models: they stay
    elif isinstance(saved_models, dict) and isinstance(saved_models.get("target"), str):
        wanted = (saved_models["target"], saved_models.get("draft"))
        if wanted != loaded_refs:
            models = wanted
    elif loaded_target and info.target and info.target != loaded_target:
        note = f" (held with {info.target}; now {loaded_target})"
    messages = [ShownMessage(m.id, m.role, m.content, m.segments(), m.complete) for m in stored
                if m.role in ("user", "assistant") and (m.content or m.role == "user")]
    unanswered = ""
    if messages and messages[-1].role == "user":
        unanswered = messages.pop().content
    return ReopenPlan(info.title, settings, info.settings.get("system"), messages, unanswered, models, note)
