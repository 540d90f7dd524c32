"""The chat app driven with Pilot over a scripted fake runtime shaped like specllama.runtime.Runtime
(no llama.cpp): the fake, the app builders, Pilot helpers and the plain-text screen snapshots
(tests/snapshots/*.txt; SPECLLAMA_UPDATE_SNAPSHOTS=1 rewrites them)."""

from __future__ import annotations

import asyncio
import difflib
import os
import threading
import time
from pathlib import Path

from specllama.decoding.cancel import CancelHandle
from specllama.decoding.events import DoneEvent, Generation, StepEvent, Summary, TokenEvent
from specllama.errors import ContextOverflowError
from specllama.tui import ChatApp, ChatSettings

SIZE = (100, 32)
TALL = (100, 48)
SNAPSHOTS = Path(__file__).resolve().parents[1] / "snapshots"

# Each inner list is one speculative step: (text, origin) per token.
SCRIPT = [
    [("def", "draft"), (" is", "draft"), ("_prime", "target")],
    [("(n", "draft"), ("):", "draft"), ("\n", "draft"), ("    return", "bonus")],
    [(" n", "target")],
    [(" >", "draft"), (" 1", "target")],
]
ANSWER = "def is_prime(n):\n    return n > 1"


# --- a fake runtime shaped like specllama.runtime.Runtime --------------------------------------

class FakeModel:
    def __init__(self, name: str):
        self.name = name

    def chat_tokens(self, messages: list[dict]) -> list[int]:
        return [ord(c) for c in "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"]


class FakeContext:
    n_ctx = 4096

    def __init__(self):
        self.tokens: list[int] = []

    @property
    def n_past(self) -> int:
        return len(self.tokens)


class FakeEngine:
    """Plays SCRIPT one step at a time, keeps a prefix cache like the real one, honours the
    request's cancel handle as the real engine does (checked before each step)."""

    def __init__(self, ctx: FakeContext, script, step_delay: float = 0.0, fail_at_step: int | None = None):
        self.ctx, self.script, self.step_delay, self.fail_at_step = ctx, script, step_delay, fail_at_step
        self.auto_k = 4  # what "K auto" picks at every step (0: the cost model says drafting loses)
        self.configs: list = []  # every request, in order: what the app asked for
        self.ks_seen: list[int] = []

    def generate(self, prompt, config, cancel=None) -> Generation:
        self.configs.append(config)
        handle = cancel or CancelHandle()
        return Generation(self._play(prompt, config, handle), handle)

    def _play(self, prompt, config, handle):
        reused = next((i for i, (a, b) in enumerate(zip(self.ctx.tokens, prompt)) if a != b),
                      min(len(self.ctx.tokens), len(prompt)))
        summary = Summary(prompt_tokens=len(prompt), reused_tokens=reused, drafter=config.drafter)
        self.ctx.tokens = list(prompt)
        finish, pieces = "stop", []
        for i, step in enumerate(self.script):
            if handle.cancelled:
                finish = "cancelled"
                break
            if i == self.fail_at_step:
                raise ContextOverflowError("context full: 4090 tokens held + 8 new > n_ctx 4096")
            time.sleep(self.step_delay)
            k = self.auto_k if config.k == "auto" else config.k  # a fixed stand-in for the engine's choice
            self.ks_seen.append(config.k)
            for text, origin, *source in step:  # (text, origin) or (text, origin, the draft's source)
                self.ctx.tokens.append(7)
                summary.tokens += 1
                pieces.append(text)
                yield TokenEvent(7, text, origin, *source)
            step_event = StepEvent(k, k, sum(t[1] == "draft" for t in step), 0.02, 0.06, 0.002)
            summary.record(step_event)
            yield step_event
        summary.text, summary.finish_reason, summary.t_generate = "".join(pieces), finish, 0.1 * summary.steps
        yield DoneEvent("", summary)


class FakeRuntime:
    """The public surface of specllama.runtime.Runtime that the app uses, and no more."""

    def __init__(self, script=SCRIPT, *, has_draft: bool = True, costs=None, **engine_options):
        self.target_name = "Fake-Coder 1.5B"
        self.draft_name = "Fake-Coder 0.5B" if has_draft else None
        self.has_draft_model = has_draft
        self.drafters = ("auto", "suffix", "model", "none") if has_draft else ("auto", "suffix", "none")
        self.target_ctx = FakeContext()
        self.engine = FakeEngine(self.target_ctx, script, **engine_options)
        self.threads = 2
        self.costs = costs  # what steps cost (the real runtime's StepCosts)
        self._model = FakeModel(self.target_name)

    def chat_tokens(self, messages: list[dict]) -> list[int]:
        return self._model.chat_tokens(messages)

    def generate(self, prompt, config, cancel=None) -> Generation:
        return self.engine.generate(prompt, config, cancel)

    def context_use(self) -> tuple[int, int]:
        return self.target_ctx.n_past, self.target_ctx.n_ctx

    def drafter_note(self, summary):
        return None  # what the real runtime says of a drafter asked for that is not paying: see test_session.py

    def close(self) -> None:
        pass


# --- helpers -------------------------------------------------------------------------------------

def chat_app(runtime=None, **settings) -> ChatApp:
    runtime = runtime or FakeRuntime()
    settings.setdefault("drafter", "model")  # the fake runtime stands for a draft model's answers
    return ChatApp(lambda progress, status: runtime, ChatSettings(**settings), flush_interval=0)


async def wait_until(pilot, condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the app"
        await pilot.pause(0.02)
    await pilot.pause()


async def send(pilot, text: str) -> None:
    app = pilot.app
    await wait_until(pilot, lambda: app.runtime is not None)
    app.query_one("#prompt").value = text
    await pilot.press("enter")
    await wait_until(pilot, lambda: not app.busy)


async def stopped_with_escape(pilot, text: str):
    """Ask, let the answer's text show, stop it with Esc, wait until the app is idle: the reply widget."""
    app = pilot.app
    await wait_until(pilot, lambda: app.runtime is not None)
    app.ask(text)
    reply = app.query("ChatMessage").last()
    await wait_until(pilot, lambda: reply.text)
    await pilot.press("escape")
    await wait_until(pilot, lambda: not app.busy)
    return reply


def origin_per_char(segments) -> list[str]:
    return [origin for text, origin in segments for _ in text]


def assert_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("SPECLLAMA_UPDATE_SNAPSHOTS") or not path.exists():
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    expected = path.read_text()
    diff = "\n".join(difflib.unified_diff(expected.splitlines(), text.splitlines(), "stored", "now", lineterm=""))
    assert text == expected, f"{path.name} differs (SPECLLAMA_UPDATE_SNAPSHOTS=1 to accept):\n{diff}"


def run(scenario):
    asyncio.run(scenario())


def app_with_history(path, runtime=None, **settings) -> ChatApp:
    runtime = runtime or FakeRuntime()
    return ChatApp(lambda progress, status: runtime, ChatSettings(**settings), flush_interval=0, history_path=path)


# Markdown answers: prose and two code blocks.
MD_SCRIPT = [
    [("Here", "draft"), (" it is:\n\n", "target")],
    [("```python\n", "draft"), ("def sq(x):\n", "bonus")],
    [("    return x * x\n```\n\n", "target")],
    [("And a test:\n\n```python\nassert sq(3) == 9\n", "draft")],
    [("```\n", "target")],
]


class GatedScript:
    """Steps that stop before step `gate_at` until the test opens the gate: "mid-answer" is then a
    fact, not a hope about timing."""

    def __init__(self, steps, gate_at: int):
        self.steps, self.gate_at, self.gate = steps, gate_at, threading.Event()

    def __iter__(self):
        for i, step in enumerate(self.steps):
            if i == self.gate_at:
                self.gate.wait(20)
            yield step
