"""Engines over tests/support/fake_llm.py's scripted contexts, and what one request gives run alone."""

from __future__ import annotations

from specllama.decoding.drafters import ModelDrafter
from specllama.decoding.engine import Engine, GenerationConfig
from tests.support.fake_llm import FakeContext, counting_rule, noisy_rule

PROMPTS = [[5, 6, 7], [9, 3], [1, 2, 3, 4], [20, 21, 22], [11]]


def model_engine(n: int, rule=None, draft_rule=None) -> Engine:
    target = FakeContext(rule or noisy_rule(4), n_seq_max=n)
    return Engine(target, {"model": ModelDrafter(FakeContext(draft_rule or counting_rule(), n_seq_max=n))})


def alone(config: GenerationConfig, prompt, rule=None, draft_rule=None) -> list[int]:
    tokens, _ = model_engine(1, rule, draft_rule).generate(prompt, config).tokens()
    return [t.id for t in tokens]
