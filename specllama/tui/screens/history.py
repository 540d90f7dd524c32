"""The saved conversations (ctrl+l / F10): reopen, rename, search, delete, export to Markdown.

Keys act on the highlighted conversation while the list has focus; `/` moves to the search box
(typing filters by title and content), enter or escape there comes back to the list. Rename and
export ask for their text in one input line at the bottom. Dismisses with the id to reopen.
"""

from __future__ import annotations

import time
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from specllama.tui.history import History, HistoryUnavailable, free_export_path
from specllama.tui.screens.dialog import Dialog

KEYS_HINT = "enter open · / search · r rename · e export · d delete (twice) · esc close"


class HistoryScreen(Dialog[int | None]):
    BINDINGS = [
        Binding("escape", "close", "close"),
        Binding("slash", "search", "search"),
        Binding("r", "rename", "rename"),
        Binding("e", "export", "export"),
        Binding("d", "delete", "delete"),
    ]

    DEFAULT_CSS = """
    HistoryScreen > Vertical {
        width: 90%;
        max-width: 110;
        height: 90%;
    }
    HistoryScreen OptionList { height: 1fr; border: none; }
    HistoryScreen Input { margin: 0 0 0 0; }
    HistoryScreen #edit { display: none; }
    HistoryScreen #edit.-shown { display: block; }
    HistoryScreen #keys { color: $text-muted; }
    """

    def __init__(self, history: History):
        super().__init__()
        self.history = history
        self._editing: str | None = None  # "rename" or "export" while the edit line is open
        self._delete_armed: int | None = None  # the id a first `d` asked about

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = "saved conversations"
            yield Input(placeholder="search titles and messages", id="search")
            yield OptionList(id="list")
            yield Input(id="edit")
            yield Static(KEYS_HINT, id="keys")

    def on_mount(self) -> None:
        self.reload()
        self.query_one("#list").focus()

    def reload(self) -> None:
        listing = self.query_one("#list", OptionList)
        search = self.query_one("#search", Input).value.strip()
        try:
            found = self.history.conversations(search)
        except HistoryUnavailable as e:
            self.notify(str(e), severity="error")
            found = []
        listing.clear_options()
        listing.add_options([Option(self._label(c), id=str(c.id)) for c in found])
        if found:
            listing.highlighted = 0
        self.query_one(Vertical).border_subtitle = f"{len(found)} conversation{'s' * (len(found) != 1)}"

    @staticmethod
    def _label(c) -> str:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(c.updated))
        # The number is what `specllama chat --conversation ID` takes.
        return f"#{c.id}  {when}  {c.title}  ({c.messages} messages · {c.target or 'unknown models'})"

    @property
    def selected(self) -> int | None:
        option = self.query_one("#list", OptionList).highlighted_option
        return int(option.id) if option is not None else None

    # --- keys ----------------------------------------------------------------------------------

    def action_close(self) -> None:
        if self._editing or self.focused is self.query_one("#search"):
            self._close_edit()
            self.query_one("#list").focus()
        else:
            self.dismiss(None)

    def action_search(self) -> None:
        self.query_one("#search").focus()

    @on(Input.Changed, "#search")
    def _search_changed(self) -> None:
        self.reload()

    @on(Input.Submitted, "#search")
    def _search_done(self) -> None:
        self.query_one("#list").focus()

    @on(OptionList.OptionSelected, "#list")
    def _open(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(int(event.option.id))

    def action_rename(self) -> None:
        if (cid := self.selected) is not None:
            self._open_edit("rename", self.history.conversation(cid).title)

    def action_export(self) -> None:
        if (cid := self.selected) is not None:
            title = self.history.conversation(cid).title
            self._open_edit("export", str(free_export_path(title)))

    def action_delete(self) -> None:
        cid = self.selected
        if cid is None:
            return
        if self._delete_armed != cid:
            self._delete_armed = cid
            self.notify(f"press d again to delete “{self.history.conversation(cid).title}”", severity="warning")
            return
        self._delete_armed = None
        self._guarded(lambda: self.history.delete(cid), "deleted")
        self.reload()

    # --- the edit line (rename, export path) ---------------------------------------------------

    def _open_edit(self, what: str, value: str) -> None:
        self._editing = what
        edit = self.query_one("#edit", Input)
        edit.border_title = what
        edit.placeholder = "new title" if what == "rename" else "file to write"
        edit.value = value
        edit.add_class("-shown")
        edit.focus()

    def _close_edit(self) -> None:
        self._editing = None
        self.query_one("#edit").remove_class("-shown")

    @on(Input.Submitted, "#edit")
    def _edit_done(self, event: Input.Submitted) -> None:
        cid, what, value = self.selected, self._editing, event.value.strip()
        self._close_edit()
        self.query_one("#list").focus()
        if cid is None or not value:
            return
        if what == "rename":
            self._guarded(lambda: self.history.rename(cid, value), "renamed")
            self.reload()
        elif what == "export":
            try:
                path = self.history.export_markdown(cid, Path(value).expanduser())
            except (OSError, HistoryUnavailable) as e:
                self.notify(f"could not export: {e}", severity="error")
                return
            self.notify(f"exported to {path}")

    def _guarded(self, change, done: str) -> None:
        try:
            change()
        except HistoryUnavailable as e:
            self.notify(str(e), severity="error")
            return
        self.notify(done)
