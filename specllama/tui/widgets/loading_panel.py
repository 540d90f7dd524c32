"""Shown while models are fetched and loaded; stays with the reason if loading failed."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import ProgressBar, Static

from specllama.tui.transfer_rate import TransferRate


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
    LoadingPanel #loading-waiting { margin-top: 1; }
    """

    def __init__(self, text: str = "loading models…", **kwargs):
        super().__init__(**kwargs)
        self._text = text
        self._speed = TransferRate()

    def compose(self) -> ComposeResult:
        yield Static(self._text, id="loading-what")
        yield ProgressBar(total=None, show_eta=False, id="loading-bar")
        waiting = Static("", id="loading-waiting")
        waiting.display = False
        yield waiting

    def show_waiting(self, message: str) -> None:
        """A message typed while loading: it is sent once the models are in (the app does it)."""
        first_line = message.splitlines()[0] if message else ""
        shown = first_line[:60] + ("…" if len(first_line) > 60 or "\n" in message else "")
        waiting = self.query_one("#loading-waiting", Static)
        waiting.update(Content.assemble(("your message waits and is sent as soon as the models are loaded:\n",
                                         "$text-accent"), f"› {shown}"))
        waiting.display = True

    def show_progress(self, done: int, total: int | None, what: str) -> None:
        """A download in progress (models not yet in the cache): its size and speed."""
        if total and done >= total:  # fetched; what follows (loading weights) reports no progress
            self.show_loading(f"{what}: done\nloading the models…")
            return
        megabytes = f"{done / 1e6:,.0f}" + (f" / {total / 1e6:,.0f} MB" if total else " MB")
        speed = self._speed.rate(done)
        if speed:
            megabytes += f" · {speed / 1e6:,.1f} MB/s"
        self.query_one("#loading-what", Static).update(f"fetching {what}\n{megabytes}")
        self.query_one(ProgressBar).update(total=total, progress=done)

    def show_loading(self, what: str) -> None:
        self.query_one("#loading-what", Static).update(what)
        self.query_one(ProgressBar).update(total=None)

    def show_failure(self, reason: str) -> None:
        self.add_class("-failed")
        self.query_one("#loading-what", Static).update(
            f"could not load the models: {reason}\n\nfix the cause and start `specllama chat` again (ctrl+q quits)")
        waiting = self.query_one("#loading-waiting", Static)
        if waiting.display:  # a message was waiting: the app put it back in the input box
            waiting.update("your message was not sent: it is back in the input box")
        self.query_one(ProgressBar).display = False
