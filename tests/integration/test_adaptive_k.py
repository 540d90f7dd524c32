"""The draft model's per-position acceptance record on synthetic costs, and the startup curve's cache."""

from __future__ import annotations

import os

import numpy as np
import pytest

from specllama.decoding.acceptance import PositionAcceptance
from specllama.decoding.cost.curve import CostCurve
from specllama.llama.context import DecodeContext
from specllama.llama.model import GGUFModel
from specllama.runtime import cost_store as cost_cache

# T(n)/T(1) of the 1.5B Q4_K_M target on the 2-core development machine (llama-bench), and a
# nearly free one (a laptop GPU).
CPU_CURVE = [1, 1.41, 1.61, 1.53, 1.94, 2.2, 2.5, 2.83, 3.0, 3.2]
FREE_CURVE = [1, 1.02, 1.04, 1.06, 1.08, 1.1, 1.12, 1.14, 1.16, 1.18]


def chooser(curve, draft_cost, **kw):
    return PositionAcceptance(lambda n: curve[n - 1] if n <= len(curve) else None, draft_cost, **kw)


def feed(policy, alpha, steps, rng):
    """Run `steps` steps with acceptance alpha per position; returns the K chosen at each."""
    chosen = []
    for _ in range(steps):
        k = policy.choose()
        accepted = 0
        while accepted < k and rng.random() < alpha:
            accepted += 1
        policy.observe(k, accepted)
        chosen.append(k)
    return chosen


def test_chooses_plain_decoding_when_the_draft_is_too_expensive():
    policy = chooser(CPU_CURVE, draft_cost=0.9)
    assert policy.best_possible_rate() < 1.0
    assert feed(policy, 1.0, 20, np.random.default_rng(0)) == [0] * 20


def test_grows_k_when_acceptance_is_high_and_verification_is_cheap():
    high = chooser(FREE_CURVE, draft_cost=0.05)
    assert feed(high, 0.97, 40, np.random.default_rng(1))[-1] >= 6
    modest = chooser(FREE_CURVE, draft_cost=0.05)
    assert 0 < feed(modest, 0.6, 40, np.random.default_rng(1))[-1] < 6


def test_falls_to_zero_on_a_bad_patch_and_returns_when_acceptance_recovers():
    policy = chooser(CPU_CURVE, draft_cost=0.3)
    rng = np.random.default_rng(2)
    assert np.mean(feed(policy, 0.95, 60, rng)[-20:]) >= 2
    bad = feed(policy, 0.1, 60, rng)
    assert bad[-30:].count(0) >= 25  # mostly plain decoding, with rare re-tries
    assert np.mean(feed(policy, 0.95, 60, rng)[-20:]) >= 2


def test_a_drafter_that_never_paid_is_not_retried():
    policy = chooser(CPU_CURVE, draft_cost=0.3, prior=0.8)
    chosen = feed(policy, 0.0, 300, np.random.default_rng(3))
    assert sum(k > 0 for k in chosen[100:]) <= 3


def test_a_free_lookup_drafter_speculates_at_moderate_acceptance():
    assert chooser(CPU_CURVE, draft_cost=0.0, prior=0.6).choose() > 0
    assert chooser(CPU_CURVE, draft_cost=0.0, prior=0.2).choose() == 0


def test_unmeasured_batch_sizes_are_never_chosen():
    policy = chooser(FREE_CURVE[:3], draft_cost=0.0, prior=0.99)
    assert policy.choose() == 2


# --- the cache ------------------------------------------------------------------------------

@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path))
    return tmp_path


def test_cost_curve_is_measured_once_then_cached(private_cache, tiny_models, monkeypatch):
    model = GGUFModel(tiny_models["a"])
    ctx = DecodeContext(model, n_ctx=512, n_threads=1)
    measured = []

    def counting(target, draft, max_n, reps):
        # The key is what this test is about; test_bench times a real curve. A real one-rep timing
        # of a tiny model on a busy machine can be implausible, and is then (rightly) not cached.
        measured.append(1)
        return CostCurve(0.001, [1.0 + 0.3 * i for i in range(max_n)], None, 256, reps)

    monkeypatch.setattr(cost_cache, "measure_cost_curve", counting)
    curve, fresh = cost_cache.cost_curve_for(ctx, None)
    assert fresh and curve.ratios[0] == 1.0 and len(curve.ratios) == cost_cache.MAX_N
    again, fresh = cost_cache.cost_curve_for(ctx, None)
    assert not fresh and again == curve and len(measured) == 1

    ctx.set_threads(2)  # a different thread count: measured again
    assert cost_cache.cost_curve_for(ctx, None)[1] and len(measured) == 2
    ctx.set_threads(1)
    assert not cost_cache.cost_curve_for(ctx, None)[1]

    os.utime(tiny_models["a"])  # the model file changed: measured again
    assert cost_cache.cost_curve_for(ctx, None)[1] and len(measured) == 3
    ctx.close()


def test_a_corrupt_cache_entry_is_measured_again(private_cache, tiny_models):
    model = GGUFModel(tiny_models["a"])
    ctx = DecodeContext(model, n_ctx=512, n_threads=1)
    key = cost_cache.cache_key(ctx, None)
    ratios = [1.0 + 0.5 * i for i in range(key["max_n"])]  # a whole curve, as measure_cost_curve gives
    cost_cache.save(key, CostCurve(0.01, ratios, None, 64, 1))
    assert cost_cache.load_cached(key).ratios == ratios
    cost_cache.entry_path(key).write_text("{not json")
    assert cost_cache.load_cached(key) is None
    ctx.close()


def test_a_new_prompt_gets_a_fresh_chance_but_keeps_the_record():
    policy = chooser(CPU_CURVE, draft_cost=0.0)
    feed(policy, 0.0, 40, np.random.default_rng(4))
    assert policy.choose() == 0 and policy.slow[0] < 0.2
    policy.new_text()
    assert policy.choose() > 0  # tried again on the new text...
    assert feed(policy, 0.0, 12, np.random.default_rng(5))[6:] == [0] * 6  # ...and dropped when it fails there too
