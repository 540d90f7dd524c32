"""Exact mode on the real Qwen pair: greedy speculative output equal to plain decoding, token for
token, with no near-tie tolerance, for several K and both verifiers; and output sampled with a seed
under suffix drafts equal to plain sampling's (decoding/position_streams.py).

Without --exact the same runs may leave plain decoding's text at near-ties (batched and one-row
kernels sum in other orders); exact mode loads the target without repacked weights, with flash
attention over a Q8_0 cache, and keeps each verification batch at 7 rows or fewer, where a row's
logits do not depend on the batch it was decoded in. Stairs cannot be made exact and is refused.
"""

from __future__ import annotations

import pytest

from specllama.decoding.engine import GenerationConfig, Request, TokenEvent
from specllama.decoding.sampling import SamplingParams
from specllama.errors import SpecllamaError
from specllama.runtime import LoadOptions, open_runtime

pytestmark = pytest.mark.real_models

PROMPTS = [
    "Write a Python function that checks whether a string is a palindrome.",
    "Rename the variable `x` to `count` in this code and return only the code:\n"
    "def tally(items):\n    x = 0\n    for item in items:\n        if item:\n            x += 1\n    return x\n",
    "Explain in two sentences what a hash map is.",
]
MAX_TOKENS = 48


@pytest.fixture(scope="module")
def exact_runtime(real_model_paths):
    with open_runtime(LoadOptions(verifiers=("stairs",), exact=True, n_ctx=1024)) as rt:  # stairs: to test its refusal
        yield rt


def greedy(rt, prompt, drafter, k):
    rt.reset()
    tokens, summary = rt.generate(prompt, GenerationConfig(max_tokens=MAX_TOKENS, drafter=drafter, k=k)).tokens()
    return [t.id for t in tokens], summary


def test_exact_mode_is_identical_to_plain_decoding(exact_runtime):
    rt, drafted = exact_runtime, 0
    for text in PROMPTS:
        prompt = rt.prompt_tokens(text)
        plain, _ = greedy(rt, prompt, "none", 0)
        # k=8 asks for more than an exact batch holds: the engine verifies at most 6 drafts a step.
        for drafter, k in [("model", 1), ("model", 3), ("model", 8), ("lookup", 4)]:
            ids, summary = greedy(rt, prompt, drafter, k)
            assert summary.k_total <= 6 * summary.steps
            drafted += summary.drafted
            assert ids == plain, f"{drafter} k={k} left plain decoding at token " + str(
                next(i for i, (a, b) in enumerate(zip(ids + [-1], plain + [-1])) if a != b))
    assert drafted > 0


def test_exact_mode_at_a_temperature_with_a_seed_gives_plain_sampling_text(exact_runtime):
    """Sampled with a seed, each position draws from its own stream (decoding/position_streams.py) and
    a suffix draft is kept where it is the token drawn there: in exact mode, whose rows do not depend on
    the batch, the text is plain sampling's bit for bit, drafts kept and turned away alike (with one
    generator a request, a turned-away draft's draws moved every later token's: the texts parted)."""
    rt, sampling, turned_away = exact_runtime, SamplingParams(temperature=0.7, seed=3), 0

    def sampled(prompt, drafter, k):
        rt.reset()
        config = GenerationConfig(max_tokens=MAX_TOKENS, drafter=drafter, k=k, sampling=sampling)
        tokens, summary = rt.generate(prompt, config).tokens()
        return [t.id for t in tokens], summary

    for text in PROMPTS:
        prompt = rt.prompt_tokens(text)
        plain, _ = sampled(prompt, "none", 0)
        for drafter, k in [("suffix", 4), ("suffix", "auto")]:
            ids, summary = sampled(prompt, drafter, k)
            turned_away += summary.drafted - summary.accepted
            assert ids == plain, f"{drafter} k={k} left plain sampling at token " + str(
                next(i for i, (a, b) in enumerate(zip(ids + [-1], plain + [-1])) if a != b))
    assert turned_away > 0


def test_stairs_is_refused_in_exact_mode(exact_runtime):
    with pytest.raises(SpecllamaError, match="stairs verification cannot be made exact"):
        exact_runtime.generate(exact_runtime.prompt_tokens("hi"), GenerationConfig(drafter="model", k=2, verify="stairs"))


def test_exact_mode_output_does_not_depend_on_how_many_prompts_share_a_decode(real_model_paths):
    """Issue 10's promise: a prompt's greedy text is the same whether it runs alone or with
    others in every decode (their rows in its batches), with and without drafts."""
    with open_runtime(LoadOptions(exact=True, n_ctx=512, parallel=4)) as rt:
        prompts = [rt.prompt_tokens(text) for text in PROMPTS]
        config = GenerationConfig(max_tokens=MAX_TOKENS, drafter="none", k=0)

        def texts(parallel, config):
            rt.reset()
            out = {}
            for tag, event in rt.engine.run_many([Request(p, config, tag=i) for i, p in enumerate(prompts)], parallel):
                out.setdefault(tag, [])
                if isinstance(event, TokenEvent):
                    out[tag].append(event.id)
            return [out[i] for i in range(len(prompts))]

        alone = texts(1, config)
        assert texts(3, config) == alone
        assert texts(3, GenerationConfig(max_tokens=MAX_TOKENS, drafter="model", k=2)) == alone
