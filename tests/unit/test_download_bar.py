"""The download bar shows only when bytes move: a load from the cache prints nothing (it printed
"models 0/? bytes" on every load), a fetch says its name and size, then size and speed."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from specllama.cli import progress


@pytest.fixture
def terminal(monkeypatch):
    """What the bar draws on a terminal, captured."""
    out = io.StringIO()
    monkeypatch.setattr(progress, "Console", lambda **kw: Console(file=out, force_terminal=True, width=100))
    return out


def test_a_load_from_the_cache_shows_no_bar(terminal):
    with progress.download_bar():
        pass  # the store calls nothing when the file is already there
    assert terminal.getvalue() == ""


def test_an_already_whole_file_shows_no_bar(terminal):
    with progress.download_bar() as update:
        update(100, 100, "m verified")
    assert terminal.getvalue() == ""


def test_a_fetch_says_what_and_how_big_then_draws_size_and_speed(terminal):
    with progress.download_bar() as update:
        update(0, 2_000_000, "m part 1/2")
        update(1_000_000, 2_000_000, "m part 1/2")
        update(2_000_000, 2_000_000, "m verified")
    shown = terminal.getvalue()
    assert shown.count("specllama: fetching m part 1/2 (2 MB)") == 1
    assert "2.0/2.0 MB" in shown  # size
    assert "/s" in shown  # speed
    assert "?" not in shown.split("fetching")[0]


def test_piped_the_fetch_is_one_line_and_no_bar(capsys):
    with progress.download_bar() as update:
        update(0, 5_000_000, "m part 1/1")
        update(2_500_000, 5_000_000, "m part 1/1")
        update(5_000_000, 5_000_000, "m verified")
    assert capsys.readouterr().err == "specllama: fetching m part 1/1 (5 MB)\n"


def test_the_chat_measures_a_downloads_speed_over_its_last_seconds():
    from specllama.tui.transfer_rate import TransferRate

    now = [0.0]
    rate = TransferRate(clock=lambda: now[0])
    assert rate.rate(0) is None  # one sample: no speed yet
    now[0] = 1.0
    assert rate.rate(3_000_000) == pytest.approx(3_000_000)
    now[0] = 10.0  # the window keeps the last few seconds: the speed now, not the average since the start
    assert rate.rate(30_000_000) == pytest.approx(3_000_000)
    now[0] = 11.0
    assert rate.rate(31_000_000) == pytest.approx(1_000_000)  # samples older than the window are dropped
    now[0] = 12.0
    assert rate.rate(500) is None  # another file started: counted afresh
