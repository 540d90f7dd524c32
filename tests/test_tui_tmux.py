"""End to end in a real terminal: the chat app (fake runtime, tests/tmux_chat_app.py) in a tmux
pane, a question typed with send-keys, the screen read back with its colours (capture-pane -e).
Checks what Pilot cannot: that a terminal receives a code answer as highlighted code, i.e. the
code line carries several foreground colours while the fences themselves are not shown."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
SGR = re.compile(r"\x1b\[([0-9;]*)m")


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def alive(session: str) -> bool:
    return subprocess.run(["tmux", "has-session", "-t", session], capture_output=True).returncode == 0


def screen(session: str, colours: bool = False) -> str:
    return tmux("capture-pane", "-p", *(["-e"] if colours else []), "-t", session)


def wait_for(session: str, text: str, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = screen(session)
        if text in shown:
            return shown
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared; the screen:\n{screen(session)}")


def foreground_colours(line: str) -> set[str]:
    """The distinct truecolor/256-colour foregrounds set on a captured line."""
    found = set()
    for params in SGR.findall(line):
        parts = params.split(";")
        for i, p in enumerate(parts):
            if p == "38" and i + 1 < len(parts):
                found.add(";".join(parts[i + 1:i + 5] if parts[i + 1] == "2" else parts[i + 1:i + 3]))
    return found


def test_a_code_answer_shows_highlighted_code_in_a_real_terminal():
    session = f"specllama-{uuid.uuid4().hex[:8]}"
    command = f"TERM=xterm-256color COLORTERM=truecolor {sys.executable} {REPO / 'tests' / 'tmux_chat_app.py'}"
    tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "36", command)
    try:
        wait_for(session, "Ask something")
        wait_for(session, "Fake-Coder 1.5B")  # loaded: the title names the models (a question before is refused)
        tmux("send-keys", "-t", session, "-l", "square a number?")
        tmux("send-keys", "-t", session, "Enter")
        shown = wait_for(session, " tokens · ")  # the answer's status line: it ended
        coloured = screen(session, colours=True)
        code_line = next(line for line in coloured.splitlines() if "return" in SGR.sub("", line))
        assert "```" not in shown  # rendered, not raw Markdown
        assert "def square(number):" in shown
        assert len(foreground_colours(code_line)) >= 3, code_line  # keyword, name, operator, comment...
        tmux("send-keys", "-t", session, "C-q")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and alive(session):
            time.sleep(0.2)
        assert not alive(session)  # ctrl+q ended the program (and with it the pane)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
