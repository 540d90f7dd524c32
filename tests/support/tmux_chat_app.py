"""The chat app on the fake runtime, run as a program in a real terminal by test_tui_tmux.py.
Takes the chat command's own arguments (a first message, --continue, --conversation ID) plus
--history PATH, --load-delay SECONDS (the models take that long to load) and --sources (answers
hold a token from each source: suffix, model, grammar, target, bonus); otherwise every answer is a
short text, numbered ("Answer 2."), and a Python code block."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specllama.cli.cmd_chat import pinned_fields, saved_conversation  # noqa: E402
from specllama.cli.main import build_parser  # noqa: E402
from specllama.tui import ChatApp, ChatSettings  # noqa: E402
from tests.support.chat_app import FakeRuntime  # noqa: E402

# One word per source, for the colour checks: (text, origin, the draft's source).
SOURCES_ANSWER = [
    [("copied", "draft", "suffix"), (" guessed", "draft", "model"), (" own", "target")],
    [(" forced", "draft", "grammar"), (" extra", "bonus")],
]
CODE_ANSWER = [
    [("Here it is:\n\n", "target")],
    [("```python\n", "draft"), ("def square(number):\n", "bonus")],
    [("    return number * number  # sq\n```\n", "target")],
]


class NumberedRuntime(FakeRuntime):
    """Says which answer it is, so a test sees a regenerated answer replace the one before."""

    answers = 0

    sources = False

    def generate(self, prompt, config, cancel=None):
        self.answers += 1
        self.engine.script = [[(f"Answer {self.answers}. ", "target")]] + (SOURCES_ANSWER if self.sources else CODE_ANSWER)
        return super().generate(prompt, config, cancel)


def option(argv: list[str], name: str, takes_value: bool) -> str | bool | None:
    """Removes a test-only option from argv; its value (True for a flag), or None when absent."""
    if name not in argv:
        return None
    at = argv.index(name)
    value = argv[at + 1] if takes_value else True
    del argv[at:at + (2 if takes_value else 1)]
    return value


if __name__ == "__main__":
    argv = sys.argv[1:]
    history = option(argv, "--history", True)
    history = Path(history) if history else None
    delay = float(option(argv, "--load-delay", True) or 0)
    sources = bool(option(argv, "--sources", False))
    args = build_parser().parse_args(["chat", *argv])
    reopen = saved_conversation(args, history) if history is not None else None
    runtime = NumberedRuntime(CODE_ANSWER, step_delay=0.05)
    runtime.sources = sources

    def load(progress, status):
        time.sleep(delay)
        return runtime

    ChatApp(load, ChatSettings(drafter="model", k=4), history_path=history,
            first_message=args.message, reopen=reopen.id if reopen is not None else None,
            pinned=pinned_fields(args)).run()
