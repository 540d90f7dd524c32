"""The prompt cache on the real 1.5B target: a restored prefix answers as the slot that kept it
would, and in exact mode as a cold run. (The tiny-model tests: tests/integration/test_prompt_cache.py.)"""

from __future__ import annotations

import pytest

from specllama.decoding.engine import GenerationConfig
from specllama.runtime import LoadOptions, open_runtime
from tests.support.prompt_cache import MIN, OTHER, SYSTEM, run, tokens

pytestmark = pytest.mark.real_models


@pytest.mark.real_models
@pytest.mark.parametrize("exact", [False, True])
def test_the_real_target_restored_from_memory_answers_as_its_slot_would(real_model, exact):
    """On the real 1.5B target (Q4_K_M), where a prefix computed in another batch shape can tip a
    near tie: a 400-token prefix restored after another prompt took the slot answers exactly as
    the slot that kept it would (the same state, bit for bit); in exact mode, as a cold run."""
    target = real_model("qwen2.5-coder-1.5b")
    config = GenerationConfig(max_tokens=24, drafter="none", k=0)
    first, second = SYSTEM + tokens(3, 20), SYSTEM + tokens(13, 12)
    opts = LoadOptions(target=str(target), load_draft=False, n_ctx=2048, parallel=1, threads=1, exact=exact)
    with open_runtime(opts) as rt:
        rt.use_prompt_cache(64 << 20, 0, None, log=lambda text: None)
        rt.prompt_cache.min_tokens = MIN
        run(rt, [first, OTHER], config)
        [(ids, summary)] = run(rt, [second], config)
    assert summary.reused_from == "memory" and summary.reused_tokens == len(SYSTEM)
    with open_runtime(opts) as rt:
        if exact:
            reference = run(rt, [second], config)[0][0]
        else:
            reference = run(rt, [first, second], config)[1][0]  # the slot itself kept the prefix
    assert ids == reference
