"""End to end in a real terminal: the chat app (fake runtime, tests/support/tmux_chat_app.py) in a tmux
pane, keys typed with send-keys, the screen read back (with its colours: capture-pane -e).
Checks what Pilot cannot: that a terminal receives a code answer as highlighted code (the code
line carries several foreground colours, the fences are not shown), and that every key the chat
uses reaches it through a terminal (tmux passes what a terminal sends: C-g is the byte 0x07...)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
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


def start(*args: str, env: str = "") -> str:
    session = f"specllama-{uuid.uuid4().hex[:8]}"
    app = " ".join([str(REPO / "tests" / "support" / "tmux_chat_app.py"), *map(shlex.quote, args)])
    command = f"TERM=xterm-256color COLORTERM=truecolor {env} {sys.executable} {app}"
    tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "40", command)
    return session


def keys(session: str, *names: str) -> None:
    """Keys by tmux's names (C-r, Up, Tab, F2) or, with -l first, literal text."""
    tmux("send-keys", "-t", session, *names)


def wait_gone(session: str, text: str, timeout: float = 15.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = screen(session)
        if text not in shown:
            return shown
        time.sleep(0.2)
    raise AssertionError(f"{text!r} stayed; the screen:\n{screen(session)}")


def quit_app(session: str) -> None:
    keys(session, "C-q")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and alive(session):
        time.sleep(0.2)
    assert not alive(session)  # ctrl+q ended the program (and with it the pane)


def test_a_code_answer_shows_highlighted_code_in_a_real_terminal():
    session = start()
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
        quit_app(session)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def test_ask_regenerate_recall_edit_and_continue_in_a_real_terminal(tmp_path):
    history = str(tmp_path / "chats.sqlite3")
    session = start("--history", history, "square a number?")  # `chat "first message"`
    try:
        wait_for(session, "Answer 1.")  # sent once the models were in, nothing typed
        wait_for(session, " tokens · ")
        keys(session, "C-r")  # regenerate: the new answer replaces the old one
        shown = wait_for(session, "Answer 2.")
        wait_for(session, " tokens · ")
        shown = screen(session)
        assert "Answer 1." not in shown and shown.count("square a number?") == 1
        keys(session, "Up")  # the question sent before, back in the input
        assert wait_for(session, "square a number?").count("square a number?") >= 1
        deadline = time.monotonic() + 10
        while screen(session).count("square a number?") < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert screen(session).count("square a number?") == 2  # in the conversation and in the input
        keys(session, "C-u")  # the input's own line editing still works: cleared
        wait_for(session, "Ask something")
        keys(session, "C-e")  # edit: the turn leaves the conversation, its question goes to the input
        shown = wait_gone(session, "Answer 2.")
        assert shown.count("square a number?") == 1
        keys(session, "-l", " please")
        keys(session, "Enter")
        wait_for(session, "Answer 3.")
        wait_for(session, "square a number? please")
        wait_for(session, " tokens · ")
        quit_app(session)
        session = start("--history", history, "--continue")  # the conversation as it was left
        shown = wait_for(session, "Answer 3.")
        assert "square a number? please" in shown and "Answer 2." not in shown
        wait_for(session, "reopened")
        quit_app(session)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def panel_value(session: str, label: str) -> str:
    line = next(line for line in screen(session).splitlines() if f"▏ {label}" in line)
    return line.split(f"▏ {label}", 1)[1].split()[0]


def test_every_key_reaches_the_chat_through_a_terminal():
    session = start("hello")
    try:
        wait_for(session, " tokens · ")
        # The single letters, with a message selected (tab), and their F-key aliases. First, while
        # no notification covers the side panel.
        keys(session, "Tab")
        for key, label, value in (("d", "drafter", "none"), ("F2", "drafter", "auto"),
                                  ("K", "K", "5"), ("F4", "K", "6"), ("k", "K", "5"), ("F3", "K", "4"),
                                  ("T", "temperature", "0.1"), ("F6", "temperature", "0.2"),
                                  ("t", "temperature", "0.1"), ("F5", "temperature", "greedy"),
                                  ("P", "p_min", "0.05"), ("F8", "p_min", "0.10"),
                                  ("p", "p_min", "0.05"), ("F7", "p_min", "0.00")):
            keys(session, key)
            deadline = time.monotonic() + 10
            while panel_value(session, label) != value and time.monotonic() < deadline:
                time.sleep(0.1)
            assert panel_value(session, label) == value, (key, screen(session))
        keys(session, "s")
        wait_gone(session, "acceptance")  # the side panel's
        keys(session, "F9")
        wait_for(session, "acceptance")
        keys(session, "Enter")  # copies the selected message
        wait_for(session, "assistant message (")
        keys(session, "Escape")  # back in the input
        keys(session, "C-y")
        wait_for(session, "last answer (")
        keys(session, "C-b")
        wait_for(session, "code block (")
        keys(session, "C-o")  # the origin view shows the answer's text as it came, fences and all
        wait_for(session, "```python")
        keys(session, "C-o")
        wait_gone(session, "```python")
        for key, shows in (("C-g", "specllama chat: keys"), ("F1", "specllama chat: keys"),
                           ("C-t", "system prompt"), ("F11", "system prompt")):
            keys(session, key)
            wait_for(session, shows)
            keys(session, "Escape")
            wait_gone(session, shows)
        for key in ("C-l", "F10"):
            keys(session, key)
            wait_for(session, "history is off")  # this app has no history file: the key says so
        keys(session, "C-n")
        wait_for(session, "new conversation")
        wait_gone(session, "Answer 1.")
        quit_app(session)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


# --- colours per source, and a message sent while loading ------------------------------------------

def attributes_of(line: str, word: str) -> set[str]:
    """The SGR attributes in force over `word` on a captured line: "bold", "italic", "underline",
    and "fg=..." for its foreground colour."""
    state: dict[str, str] = {}
    plain, at = "", []  # the text without escapes, and the attributes of each character
    pos = 0
    for m in SGR.finditer(line):
        for ch in line[pos:m.start()]:
            plain += ch
            at.append(set(state.values()))
        pos = m.end()
        params = (m.group(1) or "0").split(";")
        i = 0
        while i < len(params):
            p = params[i] or "0"
            if p == "0":
                state.clear()
            elif p in ("1", "3", "4"):
                state[p] = {"1": "bold", "3": "italic", "4": "underline"}[p]
            elif p in ("22", "23", "24"):
                state.pop({"22": "1", "23": "3", "24": "4"}[p], None)
            elif p == "38":
                n = 5 if params[i + 1] == "2" else 3
                state["fg"] = "fg=" + ";".join(params[i:i + n])
                i += n - 1
            elif p == "39":
                state.pop("fg", None)
            i += 1
    for ch in line[pos:]:
        plain += ch
        at.append(set(state.values()))
    start = plain.index(word)
    return set.intersection(*at[start:start + len(word)])


def source_words(session: str) -> dict[str, set[str]]:
    """Each source's word of SOURCES_ANSWER (tmux_chat_app.py) -> its attributes on the screen."""
    lines = screen(session, colours=True).splitlines()
    found = {}
    for word in ("copied", "guessed", "forced", "own", "extra"):
        line = next(line for line in lines if f" {word}" in SGR.sub("", line) and "Answer" in SGR.sub("", line)
                    or f"│ {word}" in SGR.sub("", line) or f" {word} " in SGR.sub("", line).split("▏")[0])
        found[word] = attributes_of(line, word)
    return found


def origin_view(session: str) -> dict[str, set[str]]:
    """source_words once the origin view is painted (ctrl+o was pressed): the suffix draft marked."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        seen = source_words(session)
        if marks(seen["copied"]):
            return seen
        time.sleep(0.2)
    return seen


def marks(attributes: set[str]) -> set[str]:
    return {a for a in attributes if not a.startswith("fg=")}


def test_each_source_has_its_own_colour_and_mark_in_a_real_terminal():
    session = start("--sources", "hello")
    try:
        wait_for(session, " tokens · ")
        keys(session, "C-o")  # the origin view
        seen = origin_view(session)
        colours = {w: next(a for a in attrs if a.startswith("fg=")) for w, attrs in seen.items()}
        assert len(set(colours.values())) == 5, colours  # suffix, model, grammar, target, bonus
        assert marks(seen["copied"]) == {"underline"} and marks(seen["guessed"]) == {"bold"}
        assert marks(seen["forced"]) == {"italic"} and not marks(seen["own"]) and not marks(seen["extra"])
        quit_app(session)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def test_without_colour_the_draft_sources_keep_their_marks_in_a_real_terminal():
    session = start("--sources", "hello", env="NO_COLOR=1")
    try:
        wait_for(session, " tokens · ")
        keys(session, "C-o")
        seen = origin_view(session)
        assert marks(seen["copied"]) == {"underline"} and marks(seen["guessed"]) == {"bold"}
        assert marks(seen["forced"]) == {"italic"} and not marks(seen["own"])
        for attrs in seen.values():  # greys only: red, green and blue alike in every colour
            fg = next((a for a in attrs if a.startswith("fg=38;2;")), None)
            if fg:
                r, g, b = fg.removeprefix("fg=38;2;").split(";")
                assert r == g == b, fg
        quit_app(session)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def test_a_message_typed_while_the_models_load_is_sent_once_they_are_in():
    session = start("--load-delay", "4")
    try:
        wait_for(session, "Ask something")
        keys(session, "-l", "square a number?")
        keys(session, "Enter")
        shown = wait_for(session, "your message waits")
        assert "Answer 1." not in shown
        wait_for(session, "Answer 1.", timeout=30)  # sent by itself once loaded, nothing typed again
        wait_for(session, " tokens · ")
        assert screen(session).count("square a number?") == 1  # in the conversation, not left in the input
        quit_app(session)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)

