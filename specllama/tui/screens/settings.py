"""The settings screen (F11 / ctrl+t): the chat's settings as a form.

"apply" changes this session (from the next answer, like the F2-F8 keys); "save as my defaults"
also writes chat.toml (user_defaults.py) for the next `specllama chat`. Context size and threads
are fixed when the models load, so they are shown, not edited. Dismisses with
(settings, saved path or None), or None when cancelled.
"""

from __future__ import annotations

from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.widgets import Button, Input, Label, Select, Static, TextArea

from specllama.decoding.request import DRAFTERS
from specllama.errors import SpecllamaError
from specllama.tui import user_defaults
from specllama.tui.screens.dialog import Dialog
from specllama.tui.settings import ChatSettings

NUMBER_FIELDS = ("temperature", "top_p", "max_tokens", "k", "p_min")


class SettingsScreen(Dialog[tuple[ChatSettings, Path | None] | None]):
    BINDINGS = [Binding("escape", "dismiss_none", "cancel"), Binding("ctrl+s", "apply(False)", "apply")]

    DEFAULT_CSS = """
    SettingsScreen > VerticalScroll {
        width: 80;
        max-width: 95%;
        height: auto;
        max-height: 95%;
    }
    SettingsScreen Grid { grid-size: 2; grid-columns: 14 1fr; grid-rows: 3; height: auto; }
    SettingsScreen Label { padding: 1 0 0 0; }
    SettingsScreen #system { height: 5; }
    SettingsScreen .note { color: $text-muted; margin: 1 0 0 0; }
    SettingsScreen Horizontal { height: auto; margin: 1 0 0 0; }
    SettingsScreen Button { margin: 0 1 0 0; }
    """

    def __init__(self, settings: ChatSettings, *, n_ctx: int | None, threads: int | None,
                 drafters: tuple[str, ...] = DRAFTERS, defaults_path: Path | None = None):
        super().__init__()
        self.settings = settings
        self.n_ctx, self.threads = n_ctx, threads
        self.drafters = drafters
        self.defaults_path = defaults_path

    def compose(self) -> ComposeResult:
        s = self.settings
        with VerticalScroll() as box:
            box.border_title = "settings"
            yield Static("system prompt", classes="note")
            yield TextArea(s.system or "", id="system", soft_wrap=True, tab_behavior="focus")
            with Grid():
                yield Label("temperature")
                yield Input(str(s.temperature), id="temperature", placeholder="0 = greedy")
                yield Label("top-p")
                yield Input(str(s.top_p), id="top_p")
                yield Label("max tokens")
                yield Input(str(s.max_tokens), id="max_tokens")
                yield Label("drafter")
                yield Select([(d, d) for d in self.drafters], value=s.drafter if s.drafter in self.drafters
                             else self.drafters[-1], allow_blank=False, id="drafter")
                yield Label("K")
                yield Input(str(s.k), id="k", placeholder="1-16 or auto")
                yield Label("p_min")
                yield Input(str(s.p_min), id="p_min", placeholder="0 = always draft K")
            ctx = f"{self.n_ctx} tokens" if self.n_ctx else "–"
            yield Static(f"context {ctx} · threads {self.threads or '–'}: fixed when the models load; "
                         "restart with --ctx / --threads to change them", classes="note", id="fixed")
            with Horizontal():
                yield Button("apply", id="apply", variant="primary")
                yield Button("save as my defaults", id="save")
                yield Button("cancel", id="cancel")
            yield Static(f"defaults file: {self.defaults_path or user_defaults.config_path()}", classes="note")

    def read_form(self) -> ChatSettings:
        """The form as settings; SpecllamaError (one line, naming the field) when a value is wrong."""
        values: dict = {"system": self.query_one("#system", TextArea).text.strip() or None,
                        "drafter": self.query_one("#drafter", Select).value}
        for name in NUMBER_FIELDS:
            text = self.query_one(f"#{name}", Input).value.strip()
            try:
                if name == "k":
                    values[name] = "auto" if text == "auto" else int(text)
                    if values[name] != "auto" and not 1 <= values[name] <= 16:
                        raise ValueError
                elif name == "max_tokens":
                    values[name] = int(text)
                    if values[name] < 1:
                        raise ValueError
                else:
                    values[name] = float(text)
                    if name == "p_min" and not 0.0 <= values[name] < 1.0:
                        raise ValueError
            except ValueError:
                raise SpecllamaError(f"{name.replace('_', ' ')}: {text!r} is not a valid value") from None
        return ChatSettings.from_dict(values, base=self.settings)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)

    def action_apply(self, save: bool) -> None:
        try:
            settings = self.read_form()
            saved = user_defaults.save(settings, self.defaults_path) if save else None
        except SpecllamaError as e:
            self.notify(str(e), title="not applied", severity="error")
            return
        self.dismiss((settings, saved))

    @on(Button.Pressed)
    def _button(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(None)
        else:
            self.action_apply(save=event.button.id == "save")
