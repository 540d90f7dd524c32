"""Shown while models are fetched and loaded; stays with the reason if loading failed."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import ProgressBar, Static


class LoadingPanel(Vertical):
    DEFAULT_CSS = """
    LoadingPanel {
        height: auto;
        padding: 1 2;
        margin: 0 1 1 0;
        border: round $accent 50%;
    }
    LoadingPanel.-failed { border: round $error; }
    LoadingPanel Static { height: auto; }
    LoadingPanel ProgressBar { margin-top: 1; }
    """

    def __init__(self, text: str = "loading models…", **kwargs):
        super().__init__(**kwargs)
        self._text = text

    def compose(self) -> ComposeResult:
        yield Static(self._text, id="loading-what")
        yield ProgressBar(total=None, show_eta=False, id="loading-bar")

    def show_progress(self, done: int, total: int | None, what: str) -> None:
        """A download in progress (models not yet in the cache)."""
        if total and done >= total:  # fetched; what follows (loading weights) reports no progress
            self.show_loading(f"{what}: done\nloading the models…")
            return
        megabytes = f"{done / 1e6:,.0f}" + (f" / {total / 1e6:,.0f} MB" if total else " MB")
        self.query_one("#loading-what", Static).update(f"fetching {what}\n{megabytes}")
        self.query_one(ProgressBar).update(total=total, progress=done)

    def show_loading(self, what: str) -> None:
        self.query_one("#loading-what", Static).update(what)
        self.query_one(ProgressBar).update(total=None)

    def show_failure(self, reason: str) -> None:
        self.add_class("-failed")
        self.query_one("#loading-what", Static).update(
            f"could not load the models: {reason}\n\nfix the cause and start `specllama chat` again (ctrl+q quits)")
        self.query_one(ProgressBar).display = False
