"""The chat app on the fake runtime, run as a program in a real terminal by test_tui_tmux.py:
every question is answered with a short text and a Python code block."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specllama.tui import ChatApp, ChatSettings  # noqa: E402
from tests.test_tui import FakeRuntime  # noqa: E402

CODE_ANSWER = [
    [("Here it is:\n\n", "target")],
    [("```python\n", "draft"), ("def square(number):\n", "bonus")],
    [("    return number * number  # sq\n```\n", "target")],
]

if __name__ == "__main__":
    runtime = FakeRuntime(CODE_ANSWER, step_delay=0.05)
    ChatApp(lambda progress, status: runtime, ChatSettings(drafter="model")).run()
