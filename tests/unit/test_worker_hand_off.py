"""serve's engine thread hands a request's events to its handler one step at a time: a step's tokens
together, then what ended the request. Each hand-off wakes the event loop, whose thread, on a machine whose
cores all decode, runs in a decoding thread's place (bench/measured/xeon-20261127-serve-step-split): a step that
accepted a 30-token copy used to hand on 30 times while the next decode ran."""

from __future__ import annotations

import threading

from specllama.decoding.events import DoneEvent, FailedEvent, StepEvent, Summary, TokenEvent
from specllama.decoding.prepared import Prepared
from specllama.decoding.request import GenerationConfig
from specllama.server.metrics import Metrics
from specllama.server.worker import EngineWorker


def token(text: str) -> TokenEvent:
    return TokenEvent(1, text, "draft")


def step(drafted: int, accepted: int) -> StepEvent:
    return StepEvent(drafted, drafted, accepted, 0.0, 0.0, 0.0, "suffix" if drafted else "")


class ScriptedRuntime:
    """Answers each request it is given with `script` (its events, tagged with the request's tag)."""

    parallelism = 2

    def __init__(self, script):
        self.script = script

    def run_many(self, queue):
        while True:
            request = queue.poll(block=True)
            if not isinstance(request, Prepared):
                return
            for event in self.script(request):
                yield request.tag, event


def handed_on(script) -> tuple[list[list], Metrics]:
    metrics = Metrics(slots=2)
    worker = EngineWorker(ScriptedRuntime(script), max_queue=2, metrics=metrics)
    worker.start()
    batches, done = [], threading.Event()

    def sink(batch: list) -> None:
        batches.append(batch)
        if not isinstance(batch[-1], TokenEvent):
            done.set()

    worker.submit(Prepared([1, 2, 3], GenerationConfig(), policy=None), sink)
    assert done.wait(10)
    worker.drain()
    return batches, metrics


def test_a_steps_tokens_are_handed_on_together_and_the_end_after_them():
    summary = Summary(prompt_tokens=3, finish_reason="stop")

    def script(request):
        yield from (token("a"), token("b"), token("c"), step(2, 2))  # two drafts accepted and the target's token
        yield from (token("d"), step(0, 0))
        yield DoneEvent("", summary)

    batches, metrics = handed_on(script)
    assert [[e.text if isinstance(e, TokenEvent) else type(e).__name__ for e in b] for b in batches] == \
        [["a", "b", "c"], ["d"], ["DoneEvent"]]
    assert metrics.generated_tokens == 4 and metrics.drafted == {"suffix": 2}


def test_tokens_not_yet_handed_on_go_with_the_failure_that_ends_the_request():
    def script(request):
        yield from (token("a"), token("b"))
        yield FailedEvent("a decode failed")  # the step never finished: no StepEvent

    batches, metrics = handed_on(script)
    assert len(batches) == 1
    assert [type(e).__name__ for e in batches[0]] == ["TokenEvent", "TokenEvent", "FailedEvent"]
    assert metrics.requests == {"failed": 1}
