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
    """Progress of model downloads, shown only once bytes move: a load from the cache (every load
    but the first) calls nothing, and shows nothing. A fetch says its name and size in one line
    when it starts; on a terminal a bar with size, speed and time left follows with the first
    bytes; piped, the line is all (logs stay readable)."""
    console = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
               TimeRemainingColumn())
    bar = Progress(*columns, console=console, transient=False, disable=not console.is_terminal)
    task = None
    announced: set[str] = set()

    def update(done: int, total: int | None, what: str) -> None:
        nonlocal task
        name = what.split(" ")[0]
        if name not in announced and not (total and done >= total):  # a fetch starts (not one just verified)
            announced.add(name)
            size = f" ({total / 1e6:,.0f} MB)" if total else ""
            console.print(f"specllama: fetching {what}{size}", highlight=False, markup=False)
        if done <= 0 or (total and done >= total and task is None):
            return  # no bytes have moved yet, or a file already whole: no bar
        if task is None:
            bar.start()
            task = bar.add_task(what, total=total)
        bar.update(task, completed=done, total=total, description=what)

    try:
        yield update
    finally:
        if task is not None:
            bar.stop()


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
