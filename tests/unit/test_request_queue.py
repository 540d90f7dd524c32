"""Requests that arrive while the engine runs (a server's clients): a RequestQueue feeds run_many,
late requests join between steps, the engine waits while idle and ends when the queue closes."""

from __future__ import annotations

import threading

from specllama.decoding.engine import DoneEvent, GenerationConfig, Request, TokenEvent
from specllama.decoding.request_queue import CLOSED, RequestQueue
from tests.support.engines import PROMPTS, alone, model_engine


def test_poll_says_nothing_waiting_then_closed():
    queue = RequestQueue()
    assert queue.poll(block=False) is None
    queue.put(Request([1, 2], GenerationConfig(), tag="a"))
    assert len(queue) == 1 and queue.discard("a") and not queue.discard("a")
    queue.close()
    assert queue.poll(block=True) is CLOSED


def test_late_requests_join_a_running_engine_and_get_their_texts_alone():
    config = GenerationConfig(drafter="model", k=2, max_tokens=30)
    engine, queue = model_engine(3), RequestQueue()
    queue.put(Request(PROMPTS[0], config, tag=0))
    texts: dict = {}
    started = threading.Event()

    def late_clients():
        started.wait(5)
        for i in (1, 2):
            queue.put(Request(PROMPTS[i], config, tag=i))
        queue.close()

    thread = threading.Thread(target=late_clients)
    thread.start()
    for tag, event in engine.run_many(queue, parallel=3):
        if isinstance(event, TokenEvent):
            texts.setdefault(tag, []).append(event.id)
            started.set()  # the first request is generating: the others arrive mid-run
        elif isinstance(event, DoneEvent):
            texts.setdefault(tag, [])
    thread.join(5)
    assert sorted(texts) == [0, 1, 2]
    for i in (0, 1, 2):
        assert texts[i] == alone(config, PROMPTS[i])


def test_an_idle_engine_waits_for_the_first_request():
    engine, queue = model_engine(2), RequestQueue()
    timer = threading.Timer(0.2, lambda: (queue.put(Request(PROMPTS[1], GenerationConfig(drafter="none", max_tokens=5), tag="x")),
                                          queue.close()))
    timer.start()
    events = list(engine.run_many(queue, parallel=2))
    assert [type(e) for _, e in events].count(DoneEvent) == 1


def test_a_queued_request_cancelled_by_its_handle_stops_alone():
    """A server holds each request's cancel handle: cancelling one (its client left) stops it after
    the current step, or before its prefill if it is still waiting; the others go on."""
    config = GenerationConfig(drafter="none", max_tokens=50)
    engine, queue = model_engine(2), RequestQueue()
    requests = {tag: Request(PROMPTS[0], config, tag=tag) for tag in ("a", "b", "c")}
    for request in requests.values():
        queue.put(request)
    requests["c"].cancel.cancel()  # still waiting: never admitted
    queue.close()
    ends = {}
    for tag, event in engine.run_many(queue, parallel=2):
        if isinstance(event, TokenEvent) and tag == "a":
            requests["a"].cancel.cancel()
        elif isinstance(event, DoneEvent):
            ends[tag] = (event.summary.finish_reason, event.summary.tokens)
    assert ends == {"a": ("cancelled", 1), "b": ("length", 50), "c": ("cancelled", 0)}
