"""The generation worker's side: engine events in, a few batched UI messages out.

Runs in a worker thread (llama.cpp releases the GIL inside its ctypes calls). Two choices keep the
UI from slowing generation on a 2-core laptop:
- messages are *posted* (`post_message` is thread-safe and returns at once), not sent with
  `call_from_thread`, which would make the worker wait for the UI to finish each repaint;
- text is flushed at most once per `interval` and only at step boundaries. Each flush costs the UI
  thread about 10 ms (layout, compositing, terminal output; measured with a fake engine); at 40 ms
  that was 7-9 % of a core during plain decoding, at 100 ms 4-5 %, so 100 ms it is: still ten
  updates a second, and a speculative step (~300 ms here) flushes at every step anyway.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from textual.message import Message

from specllama.decoding.events import AcceptanceRates, DoneEvent, Event, Summary, TokenEvent

Segment = tuple[str, str]  # (text, origin; an accepted draft's origin is its source: suffix, model, grammar)


def token_origin(origin: str, source: str) -> str:
    """A segment's colour key (widgets/chat_message.py ORIGIN_STYLES): a draft's source when it
    has a colour of its own, so suffix- and model-drafted tokens look different; a token a
    grammar forced is the grammar's, however the engine labels its origin."""
    if source == "grammar":
        return "grammar"
    if origin == "draft":
        return source if source in ("suffix", "model", "mtp") else "draft"
    return origin


@dataclass(frozen=True)
class LiveStats(AcceptanceRates):
    """The running answer's numbers, as the stats panel shows them."""

    tokens: int = 0
    tokens_per_s: float = 0.0
    steps: int = 0
    drafted: int = 0
    accepted: int = 0
    k_total: int = 0  # the K asked for, summed over steps (varies under K auto)
    step_rates: tuple[float, ...] = ()  # tokens/s of each step flushed since the last message


@dataclass
class ReplyChunk(Message):
    """New text of the answer being generated, with the live statistics."""

    reply_id: int
    segments: list[Segment]
    stats: LiveStats


@dataclass
class ReplyDone(Message):
    """The answer ended: summary on success (finish_reason says how), or the error that stopped it."""

    reply_id: int
    summary: Summary | None
    error: BaseException | None = None


@dataclass
class _Pending:
    segments: list[Segment] = field(default_factory=list)
    step_rates: list[float] = field(default_factory=list)

    def add_text(self, text: str, origin: str) -> None:
        # Neighbours of one origin become one segment: fewer spans for the UI to style.
        if self.segments and self.segments[-1][1] == origin:
            self.segments[-1] = (self.segments[-1][0] + text, origin)
        else:
            self.segments.append((text, origin))


THINKING = "thinking"  # the origin of a thinking model's thinking (shown dimmed and folded, not as the answer)


def stream_reply(reply_id: int, events: Iterable[Event], post: Callable[[Message], object],
                 interval: float = 0.1, clock: Callable[[], float] = time.perf_counter, thinking=None) -> Summary:
    """Drains a generation (`Runtime.generate`), posting ReplyChunk messages; returns its Summary.
    `thinking`: the model's dialect parser (dialects/answer.py) where its template thinks: the
    thinking's pieces then come as segments of origin THINKING."""
    pending = _Pending()

    def add(text: str, origin: str, last: str | None = None) -> None:
        if thinking is None:
            if text:
                pending.add_text(text, origin)
            return
        parts = thinking.feed(text) if text else []
        if last is not None:
            parts += thinking.end(cut=last in ("length", "context"))
        for part in parts:
            if isinstance(part, str):
                pending.add_text(part, origin)
            elif hasattr(part, "text"):
                pending.add_text(part.text, THINKING)

    t_start = last_flush = clock()
    tokens = steps = drafted = accepted = k_total = step_tokens = 0
    summary: Summary | None = None

    def flush() -> None:
        nonlocal pending
        elapsed = clock() - t_start
        stats = LiveStats(tokens, tokens / elapsed if elapsed > 0 else 0.0, steps, drafted, accepted, k_total,
                          tuple(pending.step_rates))
        post(ReplyChunk(reply_id, pending.segments, stats))
        pending = _Pending()

    for event in events:
        if isinstance(event, DoneEvent):
            # held back until the end: the last bytes of a character, a near stop string
            add(event.text, "target", last=event.summary.finish_reason or "stop")
            summary = event.summary
            continue
        if isinstance(event, TokenEvent):
            add(event.text, token_origin(event.origin, event.source))
            tokens += 1
            step_tokens += 1
            continue
        steps, drafted, accepted = steps + 1, drafted + event.drafted, accepted + event.accepted
        k_total += event.k
        # The step's own speed from the engine's timings: what the sparkline plots.
        step_time = event.seconds
        if step_time > 0 and step_tokens:
            pending.step_rates.append(step_tokens / step_time)
        step_tokens = 0
        if clock() - last_flush >= interval:
            flush()
            last_flush = clock()
    if pending.segments or pending.step_rates:
        flush()
    if summary is None:
        raise RuntimeError("the generation ended without its summary")
    return summary


def plain_text(segments: Sequence[Segment]) -> str:
    return "".join(text for text, _ in segments)
