"""Prompts for the prompt cache's tests: random token prompts sharing a 400-token system prefix, and a
runtime's answers to several of them at once."""

from __future__ import annotations

import numpy as np

from specllama.decoding.engine import DoneEvent, GenerationConfig, Request, TokenEvent
from specllama.runtime import Runtime

MIN = 64  # entries from this many tokens: the prompts below are a few hundred
GREEDY = GenerationConfig(max_tokens=12, drafter="none", k=0)


def tokens(seed: int, n: int) -> list[int]:
    return [int(t) for t in np.random.default_rng(seed).integers(200, 20000, n)]


SYSTEM, OTHER = tokens(1, 400), tokens(2, 400)


def run(rt: Runtime, prompts: list[list[int]], config=GREEDY, parallel=1) -> list[tuple[list[int], object]]:
    """Each prompt's (token ids, summary), in order."""
    out = {i: ([], None) for i in range(len(prompts))}
    for tag, event in rt.run_many([Request(p, config, tag=i) for i, p in enumerate(prompts)], parallel):
        if isinstance(event, TokenEvent):
            out[tag][0].append(event.id)
        elif isinstance(event, DoneEvent):
            out[tag] = (out[tag][0], event.summary)
        else:
            assert not hasattr(event, "message"), event
    return [out[i] for i in range(len(prompts))]
