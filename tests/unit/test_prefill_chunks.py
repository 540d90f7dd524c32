"""A prompt is decoded a chunk at a time between the engine's steps (decoding/prefill.py): a long
prompt does not hold the requests already generating still, is cut at the same places alone and
beside others, stops within a chunk when cancelled, and a chunk that fails fails its request alone."""

from __future__ import annotations

from specllama.decoding.engine import DoneEvent, Engine, FailedEvent, GenerationConfig, Request, TokenEvent
from specllama.decoding.prefill import PREFILL_CHUNK
from tests.support.fake_llm import FakeContext, counting_rule

CONFIG = GenerationConfig(drafter="none", k=0, max_tokens=3)
SHORT = [5, 6, 7]
LONG = [1 + i % 30 for i in range(3 * PREFILL_CHUNK + 200)]  # four chunks: 256, 256, 256, 199


class PromptLog(FakeContext):
    """A fake target that keeps (sequence, tokens) of every prompt decode (no logits asked), and
    may run `on_prompt(seq, count)` after the count-th of a sequence's prompt decodes."""

    def __init__(self, **kw):
        super().__init__(counting_rule(), n_seq_max=2, **kw)
        self.prompts: list[tuple[int, int]] = []
        self.on_prompt = lambda seq, count: None

    def decode(self, tokens, logits="last", seq: int = 0):
        out = super().decode(tokens, logits, seq)
        if logits == "none":
            self.prompts.append((seq, len(tokens)))
            self.on_prompt(seq, sum(1 for s, _ in self.prompts if s == seq))
        return out


def run(engine: Engine, requests: list[Request]) -> tuple[list, dict]:
    """(tag, event kind) in order, and tag -> (ids, end event)."""
    order, out = [], {}
    for tag, event in engine.run_many(requests, 2):
        ids, end = out.setdefault(tag, ([], None))
        if isinstance(event, TokenEvent):
            ids.append(event.id)
            order.append((tag, "token"))
        elif isinstance(event, (DoneEvent, FailedEvent)):
            out[tag] = (ids, event)
            order.append((tag, "end"))
    return order, out


def test_a_long_prompt_does_not_hold_a_generating_request_still():
    target = PromptLog()
    order, out = run(Engine(target), [Request(SHORT, CONFIG, tag="short"), Request(LONG, CONFIG, tag="long")])
    # The short request's three tokens come between the long prompt's chunks: it is done before the
    # long one's first token (when both were prefilled at admission, they stepped together).
    assert order.index(("short", "end")) < order.index(("long", "token"))
    chunks = [i for i, n in enumerate(target.batch_sizes) if n == PREFILL_CHUNK]
    assert len(chunks) == 3 and all(1 in target.batch_sizes[a:b] for a, b in zip(chunks, chunks[1:]))
    assert out["short"][0] == [8, 9, 10]
    assert out["long"][0] == [t.id for t in Engine(PromptLog()).generate(LONG, CONFIG).tokens()[0]]


def test_a_prompt_is_cut_at_the_same_places_alone_and_beside_another():
    alone = PromptLog()
    ids_alone, _ = Engine(alone).generate(LONG, CONFIG).tokens()
    beside = PromptLog()
    _, out = run(Engine(beside), [Request(SHORT, CONFIG, tag="short"), Request(LONG, CONFIG, tag="long")])
    cut = [n for _, n in alone.prompts]
    assert cut == [PREFILL_CHUNK] * 3 + [len(LONG) - 1 - 3 * PREFILL_CHUNK]
    assert [n for seq, n in beside.prompts if seq == 1] == cut  # the long prompt took slot 1
    assert out["long"][0] == [t.id for t in ids_alone]


def test_a_request_cancelled_mid_prompt_stops_within_one_chunk():
    target = PromptLog()
    requests = [Request(SHORT, CONFIG, tag="short"), Request(LONG, CONFIG, tag="long")]
    target.on_prompt = lambda seq, count: requests[1].cancel.cancel() if seq == 1 and count == 1 else None
    _, out = run(Engine(target), requests)
    assert out["long"][1].summary.finish_reason == "cancelled" and out["long"][0] == []
    assert [n for seq, n in target.prompts if seq == 1] == [PREFILL_CHUNK]
    assert out["short"][0] == [8, 9, 10]


def test_a_failed_chunk_fails_its_request_alone_and_frees_its_slot():
    target = PromptLog()

    def fail(seq, count):
        if seq == 1 and count == 2:
            raise RuntimeError("decode failed")

    target.on_prompt = fail
    requests = [Request(SHORT, CONFIG, tag="short"), Request(LONG, CONFIG, tag="long"),
                Request([20, 21], CONFIG, tag="next")]
    _, out = run(Engine(target), requests)
    assert isinstance(out["long"][1], FailedEvent) and "RuntimeError: decode failed" in out["long"][1].message
    assert out["short"][0] == [8, 9, 10] and out["next"][0] == [22, 23, 24]  # the freed slot served the next
