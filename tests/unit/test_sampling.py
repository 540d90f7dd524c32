"""Tests for specllama.decoding.sampling: each filter against a plain float64 full-sort reference."""

import numpy as np
import pytest

from specllama.decoding.sampling import SamplingParams, probabilities, sample
from specllama.errors import SpecllamaError

QWEN_VOCAB = 151_936


def softmax64(row, temperature=1.0):
    z = np.asarray(row, dtype=np.float64) / temperature
    e = np.exp(z - z.max())
    return e / e.sum()


def reference_nucleus(row, top_p):
    """Smallest set of tokens, most probable first, whose temperature-1 mass reaches top_p."""
    p = softmax64(row)
    order = np.argsort(-p, kind="stable")
    needed = int(np.searchsorted(np.cumsum(p[order]), top_p)) + 1
    return set(order[:needed].tolist())


def kept(row):
    return set(np.flatnonzero(row).tolist())


def random_logits(rows, vocab, scale=1.0, seed=0):
    return (np.random.default_rng(seed).standard_normal((rows, vocab)) * scale).astype(np.float32)


def llm_like_logits(rows, vocab, seed=0):
    """A few dozen plausible tokens standing well above a long Gumbel-noise tail, like a real model."""
    rng = np.random.default_rng(seed)
    logits = rng.gumbel(size=(rows, vocab)) * 2.5
    logits[:, rng.choice(vocab, 50, replace=False)] += 12
    return logits.astype(np.float32)


# ---------------------------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"temperature": -0.1},
        {"temperature": float("nan")},
        {"top_k": -1},
        {"top_p": 0.0},
        {"top_p": 1.5},
        {"min_p": -0.1},
        {"min_p": 1.0},
    ],
)
def test_invalid_params_raise_one_line_error(kwargs):
    with pytest.raises(SpecllamaError) as error:
        SamplingParams(**kwargs)
    assert "\n" not in str(error.value)


def test_greedy_flag_and_defaults():
    assert SamplingParams().greedy
    assert not SamplingParams(temperature=0.8).greedy
    SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0)  # the "all off" edges are valid


# ---------------------------------------------------------------------------------------------
# probabilities()
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=1.0),
        SamplingParams(temperature=0.8, top_p=0.95),
        SamplingParams(temperature=0.6, top_k=40, top_p=0.9, min_p=0.05),
        SamplingParams(temperature=1.3, min_p=0.1),
    ],
)
@pytest.mark.parametrize("logits", [random_logits(3, 1000), llm_like_logits(3, 1000), random_logits(2, 12)])
def test_rows_sum_to_one(params, logits):
    probs = probabilities(logits, params)
    assert probs.shape == logits.shape
    assert np.all(probs >= 0)
    np.testing.assert_allclose(probs.sum(axis=1, dtype=np.float64), 1.0, atol=1e-5)


def test_unfiltered_temperature_matches_softmax():
    logits = random_logits(2, 500, scale=2.0)
    probs = probabilities(logits, SamplingParams(temperature=0.5))
    for row, got in zip(logits, probs):
        np.testing.assert_allclose(got, softmax64(row, 0.5), rtol=1e-5, atol=1e-9)


def test_top_k_keeps_exactly_the_k_largest():
    logits = random_logits(4, 2000, seed=1)
    probs = probabilities(logits, SamplingParams(temperature=1.0, top_k=25))
    for row, got in zip(logits, probs):
        assert kept(got) == set(np.argsort(-row)[:25].tolist())
        # Within the kept set the weights are the softmax of those 25 logits.
        ids = np.argsort(-row)[:25]
        np.testing.assert_allclose(got[ids], softmax64(row[ids]), rtol=1e-5)


@pytest.mark.parametrize("top_p", [0.5, 0.9, 0.95])
def test_top_p_keeps_the_smallest_set_reaching_top_p(top_p):
    logits = random_logits(4, 300, scale=2.0, seed=2)
    probs = probabilities(logits, SamplingParams(temperature=1.0, top_p=top_p))
    for row, got in zip(logits, probs):
        assert kept(got) == reference_nucleus(row, top_p)


@pytest.mark.parametrize(
    "logits",
    [llm_like_logits(2, QWEN_VOCAB, seed=3), random_logits(2, QWEN_VOCAB, seed=3)],
    ids=["peaked-fast-path", "flat-full-sort-fallback"],
)
def test_top_p_at_full_vocab_size(logits):
    # The flat rows have a nucleus of ~100k tokens, far beyond the partitioned candidate set, so they
    # exercise the full-sort fallback and the dense output path; the peaked rows never leave the
    # candidate set.
    probs = probabilities(logits, SamplingParams(temperature=0.8, top_p=0.95))
    for row, got in zip(logits, probs):
        assert kept(got) == reference_nucleus(row, 0.95)
        assert abs(float(got.sum(dtype=np.float64)) - 1.0) < 1e-5


def test_top_p_after_top_k_renormalises_over_the_top_k():
    logits = random_logits(3, 1000, scale=0.5, seed=4)  # flat enough that top_p would keep hundreds
    probs = probabilities(logits, SamplingParams(temperature=1.0, top_k=30, top_p=0.6))
    for row, got in zip(logits, probs):
        top = np.argsort(-row)[:30]
        expected = {int(top[i]) for i in reference_nucleus(row[top], 0.6)}
        assert kept(got) == expected


def test_min_p_drops_tokens_below_min_p_times_max():
    logits = random_logits(4, 1000, scale=2.0, seed=5)
    probs = probabilities(logits, SamplingParams(temperature=0.7, min_p=0.05))
    for row, got in zip(logits, probs):
        p1 = softmax64(row)  # min-p is judged before temperature
        assert kept(got) == set(np.flatnonzero(p1 >= 0.05 * p1.max()).tolist())


def test_temperature_changes_weights_not_the_kept_set():
    logits = random_logits(3, 800, scale=2.0, seed=6)
    cold = probabilities(logits, SamplingParams(temperature=0.3, top_p=0.9, min_p=0.01))
    hot = probabilities(logits, SamplingParams(temperature=1.7, top_p=0.9, min_p=0.01))
    for a, b in zip(cold, hot):
        assert kept(a) == kept(b)
        assert a.max() > b.max()


def test_temperature_to_zero_approaches_greedy():
    logits = random_logits(3, 1000, scale=3.0, seed=7)
    greedy = probabilities(logits, SamplingParams(temperature=0.0))
    assert np.array_equal(np.argmax(greedy, axis=1), np.argmax(logits, axis=1))
    assert np.all(greedy.sum(axis=1) == 1) and np.all(np.count_nonzero(greedy, axis=1) == 1)
    for temperature in (0.1, 0.01, 0.001):
        near = probabilities(logits, SamplingParams(temperature=temperature))
        assert np.array_equal(np.argmax(near, axis=1), np.argmax(logits, axis=1))
    assert np.all(near.max(axis=1) > 0.999)  # the margin of random logits is far above 0.001 * log(1000)


def test_greedy_ties_pick_lowest_id():
    logits = np.zeros((1, 10), dtype=np.float32)
    logits[0, [6, 3]] = 2.0
    assert np.flatnonzero(probabilities(logits, SamplingParams()))[0] == 3


def test_rejects_non_matrix_logits():
    with pytest.raises(ValueError):
        probabilities(np.zeros(10, dtype=np.float32), SamplingParams(temperature=1.0))


# ---------------------------------------------------------------------------------------------
# sample()
# ---------------------------------------------------------------------------------------------


def test_same_seed_same_sample():
    probs = probabilities(random_logits(1, 5000, scale=2.0, seed=8), SamplingParams(temperature=1.0))[0]
    first = [sample(probs, np.random.default_rng(42)) for _ in range(3)]
    again = [sample(probs, np.random.default_rng(42)) for _ in range(3)]
    assert first == again
    rng_a, rng_b = np.random.default_rng(7), np.random.default_rng(7)
    assert [sample(probs, rng_a) for _ in range(50)] == [sample(probs, rng_b) for _ in range(50)]


class ScriptedRandom:
    def __init__(self, value):
        self.value = value

    def random(self):
        return self.value


@pytest.mark.parametrize("scale", [1 - 1e-6, 1.0, 1 + 1e-6])
@pytest.mark.parametrize("u", [0.0, 0.5, 1 - 2**-53])
def test_sample_handles_rows_summing_near_one_and_extreme_uniforms(scale, u):
    row = np.array([0.0, 0.3, 0.0, 0.7, 0.0]) * scale
    token = sample(row, ScriptedRandom(u))
    assert token in (1, 3)  # never a zero-probability token, never out of range
    assert token == (1 if u < 0.3 else 3)


def test_sample_frequencies_match_probabilities():
    row = np.array([0.1, 0.0, 0.6, 0.3], dtype=np.float32)
    rng = np.random.default_rng(9)
    draws = 20_000
    counts = np.bincount([sample(row, rng) for _ in range(draws)], minlength=4)
    assert counts[1] == 0
    sigma = np.sqrt(draws * row * (1 - row))
    assert np.all(np.abs(counts - draws * row) <= 5 * sigma + 1e-9)


@pytest.mark.parametrize("size", [1023, 1024, 5000, 151_936])
def test_sample_over_blocks_is_one_running_sum(size):
    """sample() sums a vocabulary-sized row in blocks, then inside one block: the token drawn for a
    uniform is the one a single running sum over the row gives, zero-weight tokens and blocks never
    drawn, the ends of the row included."""
    rng = np.random.default_rng(size)
    row = rng.random(size).astype(np.float32) ** 8
    row[rng.random(size) < 0.5] = 0.0
    row[: min(2048, size // 2)] = 0.0  # zeros at the start (two whole blocks in a vocabulary-sized row)
    row[-1] = 0.0
    cumulative = np.cumsum(row, dtype=np.float64)
    for u in [0.0, 1e-12, *rng.random(300), 1 - 2**-53]:
        token = sample(row, ScriptedRandom(u))
        assert row[token] > 0
        expected = int(np.searchsorted(cumulative, u * cumulative[-1], side="right"))
        assert token == min(expected, int(np.flatnonzero(row)[-1]))


@pytest.mark.parametrize("tier", ["the heaviest few", "the partitioned head", "the whole row sorted"])
def test_top_p_finds_the_nucleus_whichever_head_holds_it(tier):
    """The nucleus is looked for among the weights above 1e-4 of the top, then the largest 8192, then the
    whole row: a row built for each to be the first that reaches top_p keeps the reference's set."""
    rng = np.random.default_rng(21)
    weights = np.full(QWEN_VOCAB, 1e-9)
    weights[0] = 1.0
    if tier == "the heaviest few":
        weights[1:40] = rng.uniform(0.01, 0.5, 39)
    elif tier == "the partitioned head":
        weights[1:8001] = np.exp(rng.uniform(np.log(3e-5), np.log(9.9e-5), 8000))  # under the first cut, ~0.5 together
    else:
        weights[1:] = np.exp(rng.uniform(np.log(1e-7), np.log(9.5e-5), QWEN_VOCAB - 1))  # ~2x the top's weight, flat
    logits = np.log(weights).astype(np.float32)[None, :]
    got = probabilities(logits, SamplingParams(temperature=1.0, top_p=0.9))[0]
    assert kept(got) == reference_nucleus(logits[0], 0.9)
