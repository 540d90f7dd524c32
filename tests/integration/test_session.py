"""The front-ends (chat, run, batch, bench, costs, serve) reach loaded models only through the
declared Session (runtime/session.py): the real Runtime has every member it declares, the chat's
fake stands in for nothing else, no front-end reads a member it does not declare or imports a
model or a context, and what a session says of a drafter that is not paying reaches the user once."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from specllama.cli.main import main
from specllama.runtime.loaded import Runtime
from specllama.runtime.notices import Notice
from specllama.runtime.session import Session
from tests.support.chat_app import SIZE, FakeRuntime, chat_app, run, send, wait_until

PACKAGE = Path(__file__).resolve().parents[2] / "specllama"
FRONT_ENDS = ("cli", "tui", "server", "batch", "bench")
# Names a front-end gives the session it holds.
SESSION_NAMES = {"runtime", "session", "rt", "_runtime"}
# What only the runtime package may touch: llama.cpp's objects and the engine behind the session.
# (Generic words such as `suffix` are checked only off a session, by session_reads.)
INSIDE = {"target_model", "draft_model", "target_ctx", "draft_ctx", "engine", "target_path", "draft_path", "judge_context",
          "step_costs"}


def declared() -> set[str]:
    names = {n for n in vars(Session) if not n.startswith("_")}
    return names | set(Session.__annotations__)


def test_the_real_runtime_has_every_member_the_protocol_declares():
    for name in declared():
        assert hasattr(Runtime, name) or name in Session.__annotations__, name
        member = getattr(Session, name, None)
        if callable(member):
            want = [p.name for p in inspect.signature(member).parameters.values()]
            got = [p.name for p in inspect.signature(getattr(Runtime, name)).parameters.values()]
            assert got == want, name


def test_the_chats_fake_stands_in_for_nothing_outside_the_protocol():
    fake = {n for n in (*vars(FakeRuntime), *vars(FakeRuntime())) if not n.startswith("_")}
    assert fake - declared() - {"target_ctx", "engine", "has_draft_model"} == set()  # its script and stand-in context


def session_reads(tree: ast.AST) -> set[str]:
    """Attributes read off anything named like a session (`runtime.x`, `self.runtime.x`, `state.runtime.x`)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            holder = node.value
            name = holder.id if isinstance(holder, ast.Name) else holder.attr if isinstance(holder, ast.Attribute) else None
            if name in SESSION_NAMES:
                out.add(node.attr)
    return out


@pytest.mark.parametrize("package", FRONT_ENDS)
def test_front_ends_ask_a_session_for_nothing_it_does_not_declare(package):
    allowed = declared() | {"has_draft_model", "close_runtime"}  # the app's own method shares the word
    for path in sorted((PACKAGE / package).rglob("*.py")):
        tree = ast.parse(path.read_text())
        unknown = session_reads(tree) - allowed
        assert not unknown, f"{path.relative_to(PACKAGE)} reads {sorted(unknown)} off a session"
        inside = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} & INSIDE
        assert not inside, f"{path.relative_to(PACKAGE)} touches {sorted(inside)}"
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not imported & {"specllama.llama.context", "specllama.llama.model"}, path


def test_a_model_drafter_that_does_not_pay_says_so_once_with_its_numbers(tiny_models, capsys):
    """Tiny "b" drafting for tiny "a" (two random models): the planner soon stops drafting, or its
    drafts are refused; the run says so on stderr, --stats says it in its lines, -q silences it."""
    argv = ["run", "hi", "-m", str(tiny_models["a"]), "-md", str(tiny_models["b"]), "--drafter", "model",
            "-n", "16", "-c", "256"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "the draft model" in ln]
    assert len(lines) == 1 and "of a target step each" in lines[0] and ("accepted" in lines[0] or "acceptance" in lines[0])
    assert main(argv + ["--stats"]) == 0
    err = capsys.readouterr().err
    assert sum("the draft model" in ln for ln in err.splitlines()) == 1 and " tok/s · " in err.splitlines()[0]
    assert main(argv + ["-q"]) == 0
    assert "the draft model" not in capsys.readouterr().err


def test_the_chat_says_a_drafter_is_not_paying_once_per_session():
    class Unpaid(FakeRuntime):
        def drafter_note(self, summary):
            return Notice("drafter-not-paying", "the draft model drafted nothing: its drafts cost 0.54 of a target step")

    async def scenario():
        notices = []
        app = chat_app(Unpaid())
        async with app.run_test(size=SIZE, message_hook=lambda m: notices.append(m) if type(m).__name__ == "Notify"
                                else None) as pilot:
            await send(pilot, "hi")
            await send(pilot, "again")
            await wait_until(pilot, lambda: not app.busy)
        said = [m.notification.message for m in notices if "drafted nothing" in m.notification.message]
        assert said == ["the draft model drafted nothing: its drafts cost 0.54 of a target step"]
    run(scenario)


def test_the_chat_shows_the_stats_headline_after_an_answer():
    from specllama.decoding.cost.online import StepCosts
    from specllama.tui.widgets import ChatMessage

    costs = StepCosts()
    for _ in range(4):
        costs.record_step(1, 0.05)

    async def scenario():
        app = chat_app(FakeRuntime(costs=costs))
        async with app.run_test(size=SIZE) as pilot:
            await send(pilot, "hi")
            await wait_until(pilot, lambda: not app.busy)
            border = str(app.query(ChatMessage).last().border_subtitle)
            assert " tok/s · " in border and "x vs plain" in border  # the short form, under the answer
            full = str(app.panel.query_one("#speed").tooltip)
            assert "x vs plain (estimated from this run's own costs)" in full and "drafts accepted" in full
    run(scenario)
