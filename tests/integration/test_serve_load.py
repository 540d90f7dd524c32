"""A bounded load test of `specllama serve` with the official async client: 300 requests, 16 at a
time, random sizes, streamed or not, one in ten abandoned by its client, against 4 slots and a
queue of 10 (so some are refused). Nothing may be lost: each request is answered whole, refused
with 503 + Retry-After (and then retried), or abandoned by the test itself; every answer to the same greedy request
is the same text; the server ends idle, and its memory does not grow with the requests served."""

from __future__ import annotations

import asyncio
import random
from collections import Counter, defaultdict

import openai

from tests.support.live_serve import LiveServer, outcomes, wait_for

PROMPTS = ["Say hi.", "Write a haiku about rivers.", "def fib(n):", "List three colours.",
           "Explain recursion in one line. " * 3, "Translate 'good morning' to French.",
           "What is 2 + 2? Answer with reasoning. " * 6, "Name a prime number."]
SIZES = (1, 4, 8, 24)
RETRIES = 20
GROWTH_LIMIT_KIB = 24 * 1024  # the suffix history alone may keep ~20k tokens of answers here


async def one(client, sem, rng: random.Random):
    """(outcome, request key, text, how many 503s it met first). A refused request waits a little
    and tries again, as a client that honours Retry-After does (at 0.3 of the wait, to keep the
    test short); after RETRIES refusals it counts as refused."""
    prompt, max_tokens = rng.choice(PROMPTS), rng.choice(SIZES)
    stream, abandon = rng.random() < 0.5, rng.random() < 0.1
    key = (prompt, max_tokens)
    kwargs = dict(model="a", messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=0)
    refusals = 0
    async with sem:
        while True:
            try:
                kind, text = await (_streamed(client, kwargs, abandon) if stream else _whole(client, kwargs, abandon, rng))
                return kind, key, text, refusals
            except openai.APIStatusError as e:
                assert e.status_code == 503 and int(e.response.headers["retry-after"]) >= 1, e
                refusals += 1
                if refusals > RETRIES:
                    return "refused", key, None, refusals
                await asyncio.sleep(0.3 * int(e.response.headers["retry-after"]))


async def _streamed(client, kwargs: dict, abandon: bool):
    response = await client.chat.completions.create(stream=True, **kwargs)
    text, chunks = "", 0
    async for chunk in response:
        chunks += 1
        if abandon and chunks == 2:
            await response.close()
            return "abandoned", None
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
    return "ok", text


async def _whole(client, kwargs: dict, abandon: bool, rng: random.Random):
    call = client.chat.completions.create(**kwargs)
    if not abandon:
        reply = await call
    else:
        try:
            reply = await asyncio.wait_for(call, timeout=rng.uniform(0.005, 0.05))
        except asyncio.TimeoutError:
            return "abandoned", None
    assert reply.usage.completion_tokens <= kwargs["max_tokens"]
    return "ok", reply.choices[0].message.content


async def load(live: LiveServer, n: int, seed: int) -> list[tuple]:
    rng = random.Random(seed)
    sem = asyncio.Semaphore(16)
    async with live.async_client(timeout=60) as client:
        return await asyncio.gather(*(one(client, sem, random.Random(rng.random())) for _ in range(n)))


def test_300_requests_16_at_a_time_lose_nothing_and_leave_memory_flat(tiny_models, tmp_path):
    live = LiveServer(["--target", str(tiny_models["a"]), "--drafter", "suffix", "-k", "3", "--ctx", "1024",
                       "--parallel", "4", "--queue", "10"], tmp_path / "serve.log")
    try:
        results = asyncio.run(load(live, 100, seed=1))  # warm-up: caches, history, allocator
        wait_for(lambda: live.metrics()["specllama_requests_active"] == 0, what="the server to go idle")
        rss_warm = live.rss_kib()
        results += asyncio.run(load(live, 200, seed=2))
        wait_for(lambda: live.metrics()["specllama_requests_active"] == 0, what="the server to go idle")
        rss_end = live.rss_kib()
        kinds = Counter(kind for kind, _, _, _ in results)
        refusals = sum(n for _, _, _, n in results)
        assert sum(kinds.values()) == 300 and set(kinds) <= {"ok", "refused", "abandoned"}
        assert kinds["ok"] >= 250 and kinds["abandoned"] >= 10 and refusals >= 1, (kinds, refusals)
        texts = defaultdict(set)
        for kind, key, text, _ in results:
            if kind == "ok":
                texts[key].add(text)
        assert all(len(found) == 1 for found in texts.values()), {k: v for k, v in texts.items() if len(v) > 1}
        m, counted = live.metrics(), outcomes(live)
        assert m["specllama_requests_queued"] == 0 and "failed" not in counted
        assert counted["refused"] >= refusals  # every 503 a client saw, counted (and nothing else failed)
        assert kinds["ok"] + refusals <= sum(counted.values()) <= 300 + refusals
        assert rss_end - rss_warm < GROWTH_LIMIT_KIB, (rss_warm, rss_end)
        print(f"load: {dict(kinds)}, {refusals} refusals, server outcomes {counted}, RSS {rss_warm} -> {rss_end} KiB")
    finally:
        assert live.stop() == 0
    assert "Traceback" not in live.stderr()
