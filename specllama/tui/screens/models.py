"""The model picker (F12): the registry's models and pairs, a target and draft to choose, and the
pair's check from the GGUF headers before anything loads (model_choice.py).

Dismisses with a Choice (loaded in the background by model_swap.py) or None. A pair the headers
refuse is not dismissed with: the reason stays on screen, and nothing is loaded.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.widgets import Button, DataTable, Label, OptionList, Select, Static
from textual.widgets.option_list import Option

from specllama.models.registry import Registry
from specllama.tui.model_choice import Choice, model_rows, pair_choices, precheck, size_text
from specllama.tui.screens.dialog import Dialog

NO_DRAFT = "-"  # the draft Select's value for "no draft model"


class ModelPickerScreen(Dialog[Choice | None]):
    BINDINGS = [Binding("escape", "dismiss_none", "cancel"), Binding("ctrl+s", "load", "load")]

    DEFAULT_CSS = """
    ModelPickerScreen > VerticalScroll {
        width: 110;
        max-width: 98%;
        height: auto;
        max-height: 95%;
    }
    ModelPickerScreen DataTable { height: auto; max-height: 12; }
    ModelPickerScreen OptionList { height: auto; max-height: 8; }
    ModelPickerScreen Grid { grid-size: 2; grid-columns: 10 1fr; grid-rows: 3; height: auto; }
    ModelPickerScreen Label { padding: 1 0 0 0; }
    ModelPickerScreen .note { color: $text-muted; margin: 1 0 0 0; }
    ModelPickerScreen #check { margin: 1 0 0 0; }
    ModelPickerScreen #check.-refused { color: $text-error; }
    ModelPickerScreen Horizontal { height: auto; margin: 1 0 0 0; }
    ModelPickerScreen Button { margin: 0 1 0 0; }
    """

    def __init__(self, registry: Registry, *, current_target: str | None = None, current_draft: str | None = None):
        super().__init__()
        self.registry = registry
        self.pairs = pair_choices(registry)
        self.current = (current_target or "none yet") + (f" ← {current_draft}" if current_draft else "")
        default = registry.pairs.get(registry.default_pair)
        self._initial = Choice(default.target, default.draft, default.name) if default else None

    def compose(self) -> ComposeResult:
        names = list(self.registry.models)
        first = self._initial or Choice(names[0], None) if names else None
        with VerticalScroll() as box:
            box.border_title = "models (m / F12)"
            yield Static(f"loaded now: {self.current}", classes="note")
            table = DataTable(id="models", cursor_type="row", zebra_stripes=True)
            table.add_columns("model", "role", "size", "cached", "source", "description")
            for row in model_rows(self.registry):
                table.add_row(row.name, row.role, size_text(row.size), "yes" if row.cached else "no", row.source,
                              row.description, key=row.name)
            yield table
            yield Static("pairs (enter picks one):", classes="note")
            yield OptionList(*(Option(f"{c.pair}: {c.label()}", id=c.pair) for c in self.pairs), id="pairs")
            with Grid():
                yield Label("target")
                yield Select([(n, n) for n in names], value=first.target if first else Select.BLANK,
                             allow_blank=False, id="target")
                yield Label("draft")
                yield Select([("none (plain decoding or lookup)", NO_DRAFT)] + [(n, n) for n in names],
                             value=(first.draft or NO_DRAFT) if first else NO_DRAFT, allow_blank=False, id="draft")
            yield Static("", id="check")
            yield Static("Loads in the background; the models loaded now keep answering until the new ones "
                         "are ready. Context size, threads and K auto stay as they are.", classes="note")
            with Horizontal():
                yield Button("load (ctrl+s)", id="load", variant="primary")
                yield Button("cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self._show_check()

    def chosen(self) -> Choice:
        target = self.query_one("#target", Select).value
        draft = self.query_one("#draft", Select).value
        pair = next((c.pair for c in self.pairs if (c.target, c.draft) == (target, None if draft == NO_DRAFT else draft)),
                    None)
        return Choice(str(target), None if draft == NO_DRAFT else str(draft), pair)

    def _show_check(self):
        result = precheck(self.registry, self.chosen())
        check = self.query_one("#check", Static)
        check.update(("" if result.ok else "refused: ") + result.text)
        check.set_class(not result.ok, "-refused")
        return result

    @on(OptionList.OptionSelected, "#pairs")
    def _pair_picked(self, event: OptionList.OptionSelected) -> None:
        choice = next(c for c in self.pairs if c.pair == event.option.id)
        self.query_one("#target", Select).value = choice.target
        self.query_one("#draft", Select).value = choice.draft or NO_DRAFT

    @on(Select.Changed)
    def _changed(self) -> None:
        self._show_check()

    @on(Button.Pressed, "#load")
    def action_load(self) -> None:
        result = self._show_check()  # again: a file may have been fetched or removed meanwhile
        if result.ok:
            self.dismiss(self.chosen())
        else:
            self.notify(result.text, title="not loaded", severity="error", timeout=15)

    @on(Button.Pressed, "#cancel")
    def action_dismiss_none(self) -> None:
        self.dismiss(None)
