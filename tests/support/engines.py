"""Engines over tests/support/fake_llm.py's scripted contexts, and what one request gives run alone."""

from __future__ import annotations

from specllama.decoding.drafters import ModelDrafter
from specllama.decoding.engine import DoneEvent, Engine, GenerationConfig, TokenEvent
from tests.support.fake_llm import FakeContext, counting_rule, noisy_rule

PROMPTS = [[5, 6, 7], [9, 3], [1, 2, 3, 4], [20, 21, 22], [11]]
PROMPT = PROMPTS[0]


def engine_with(target, drafter=None) -> Engine:
    return Engine(target, {drafter.name: drafter} if drafter else None)


def generate(target, drafter=None, **config):
    """(token ids, token events, summary) of one generation of PROMPT; the request names the drafter given
    (or none)."""
    config.setdefault("drafter", drafter.name if drafter else "none")
    events = list(engine_with(target, drafter).generate(PROMPT, GenerationConfig(**config)))
    assert isinstance(events[-1], DoneEvent) and not any(isinstance(e, DoneEvent) for e in events[:-1])
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    summary = events[-1].summary
    assert "".join(e.text for e in tokens) + events[-1].text == summary.text  # the texts are the output
    return [e.id for e in tokens], tokens, summary


def model_engine(n: int, rule=None, draft_rule=None) -> Engine:
    target = FakeContext(rule or noisy_rule(4), n_seq_max=n)
    return Engine(target, {"model": ModelDrafter(FakeContext(draft_rule or counting_rule(), n_seq_max=n))})


def alone(config: GenerationConfig, prompt, rule=None, draft_rule=None) -> list[int]:
    tokens, _ = model_engine(1, rule, draft_rule).generate(prompt, config).tokens()
    return [t.id for t in tokens]
