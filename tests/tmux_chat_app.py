"""The chat app on the fake runtime, run as a program in a real terminal by test_tui_tmux.py.
Takes the chat command's own arguments (a first message, --continue, --conversation ID) plus
--history PATH; every answer is a short text, numbered ("Answer 2."), and a Python code block."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specllama.cli.cmd_chat import pinned_fields, saved_conversation  # noqa: E402
from specllama.cli.main import build_parser  # noqa: E402
from specllama.tui import ChatApp, ChatSettings  # noqa: E402
from tests.test_tui import FakeRuntime  # noqa: E402

CODE_ANSWER = [
    [("Here it is:\n\n", "target")],
    [("```python\n", "draft"), ("def square(number):\n", "bonus")],
    [("    return number * number  # sq\n```\n", "target")],
]


class NumberedRuntime(FakeRuntime):
    """Says which answer it is, so a test sees a regenerated answer replace the one before."""

    answers = 0

    def generate(self, prompt, config, cancel=None):
        self.answers += 1
        self.engine.script = [[(f"Answer {self.answers}. ", "target")]] + CODE_ANSWER
        return super().generate(prompt, config, cancel)


if __name__ == "__main__":
    argv = sys.argv[1:]
    history = None
    if "--history" in argv:
        at = argv.index("--history")
        history = Path(argv[at + 1])
        del argv[at:at + 2]
    args = build_parser().parse_args(["chat", *argv])
    reopen = saved_conversation(args, history) if history is not None else None
    runtime = NumberedRuntime(CODE_ANSWER, step_delay=0.05)
    ChatApp(lambda progress, status: runtime, ChatSettings(drafter="model", k=4), history_path=history,
            first_message=args.message, reopen=reopen.id if reopen is not None else None,
            pinned=pinned_fields(args)).run()
