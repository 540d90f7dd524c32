"""Tests for specllama.decoding.target_rows: every way a row is drawn from (the hot tokens alone, the
cold tokens by rejection, the whole-row fallback, a top-k's few, with a token taken out) follows
`probabilities()`' row exactly, by a chi-square test; probabilities read are the row's."""

import numpy as np
import pytest

from specllama.decoding.sampling import SamplingParams, kept_weights, probabilities
from specllama.decoding.target_rows import KeptWeights, LazyProbabilities, PeakedRow, peaked_filtered
from specllama.decoding.verify import verify_sampling
from tests.support.chi_square import follows
from tests.support.peaked_rows import DRAWS, VOCAB, ColdNear, Uniform, WideRows, peaked_logits


def expected(x: np.ndarray, temperature: float, without: int | None = None) -> np.ndarray:
    p = probabilities(x[None, :], SamplingParams(temperature=temperature))[0].astype(np.float64)
    if without is not None:
        p[without] = 0.0
    return p / p.sum()


def drawn(row, seed: int, without: int | None = None, draws: int = DRAWS) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.bincount([row.draw(rng, without) for _ in range(draws)], minlength=row.logits.size)


@pytest.mark.parametrize("temperature", [0.7, 1.0])
def test_a_peaked_rows_draws_follow_its_probabilities(temperature):
    x = peaked_logits(1)
    row = PeakedRow.of(x, temperature)
    assert isinstance(row, PeakedRow) and row.hot.size < 20  # only the near-top tokens are worked out
    ok, statistic, df = follows(drawn(row, 2), expected(x, temperature))
    assert ok, f"chi2={statistic:.1f} df={df}"


@pytest.mark.parametrize("which", ["top", "hot", "cold"])
def test_a_draw_without_a_token_follows_the_rest_of_the_row(which):
    x = peaked_logits(3)
    row = PeakedRow.of(x, 0.7)
    order = np.argsort(-x)
    token = {"top": int(order[0]), "hot": int(order[3]), "cold": int(order[-1])}[which]
    counts = drawn(row, 4, without=token)
    assert counts[token] == 0
    ok, statistic, df = follows(counts, expected(x, 0.7, without=token))
    assert ok, f"chi2={statistic:.1f} df={df}"


@pytest.mark.parametrize("without", [None, "top", "cold"])
def test_cold_tokens_drawn_by_rejection_follow_the_row(without):
    """COLD = 1 nat: the tail sits just under the bound, so draws land on cold tokens and keep most."""
    x = peaked_logits(5, tail=(-2.5, -1.05), vocab=120)  # few tokens: the test tells small biases apart
    row = ColdNear.of(x, 1.0)
    assert isinstance(row, ColdNear) and row.cold_mass > 10 * row.hot_total  # the cold way is the usual one here
    token = None if without is None else int(np.argmax(x)) if without == "top" else int(np.argmin(x))
    counts = drawn(row, 6, without=token)
    cold = x < row.threshold
    assert counts[cold].sum() > DRAWS // 2
    ok, statistic, df = follows(counts, expected(x, 1.0, without=token))
    assert ok, f"chi2={statistic:.1f} df={df}"


def test_a_draw_whose_attempts_all_fail_finishes_on_the_whole_row_without_bias():
    """COLD = 1 nat and a tail ~30 nats down: nearly every attempt picks a cold token and drops it,
    so draws end in the whole-row fallback, which must keep the distribution."""
    x = peaked_logits(7, tail=(-60.0, -30.0), vocab=120)
    x[np.argsort(-x)[1:4]] = -0.5  # a few hot tokens besides the top
    row = ColdNear.of(x, 1.0)
    calls = []
    whole = row.whole
    row.whole = lambda: calls.append(1) or whole()
    counts = drawn(row, 8, draws=5000)
    assert len(calls) > 2000  # ~0.94 ** 8 of the draws: every attempt went the cold way
    ok, statistic, df = follows(counts, expected(x, 1.0))
    assert ok, f"chi2={statistic:.1f} df={df}"


@pytest.mark.parametrize("temperature", [1e-30, 1e-3, 0.1, 0.7, 1.0, 5.0, 1e3])
def test_every_cold_tokens_weight_is_below_the_bound(temperature):
    rng = np.random.default_rng(9)
    for seed in range(20):
        x = peaked_logits(seed, tail=(-200.0, 10.0)) * np.float32(rng.uniform(0.1, 3.0)) + np.float32(rng.normal(0, 50))
        row = PeakedRow.of(x.astype(np.float32), temperature)
        if not isinstance(row, PeakedRow):
            continue
        cold = x < row.threshold
        assert np.all(row._weights(x[cold]) <= row.bound)
        np.testing.assert_array_equal(row.hot, np.flatnonzero(~cold))


def test_a_flat_row_is_not_peaked_and_is_kept_whole():
    x = np.random.default_rng(10).normal(0, 1, VOCAB).astype(np.float32)
    row = PeakedRow.of(x, 1.0)
    assert isinstance(row, KeptWeights) and row.ids is None
    np.testing.assert_array_equal(row.weights, kept_weights(x[None, :], SamplingParams(temperature=1.0))[0])


def test_a_peaked_rows_probabilities_are_the_rows():
    x = peaked_logits(11)
    row, p = PeakedRow.of(x, 0.7), probabilities(x[None, :], SamplingParams(temperature=0.7))[0]
    for token in [int(np.argmax(x)), *np.argsort(-x)[1:5].tolist(), int(np.argmin(x))]:
        assert row.prob(token) == pytest.approx(float(p[token]), rel=1e-5, abs=1e-30)


def test_lazy_rows_choose_peaked_only_for_a_temperature_alone():
    logits = np.stack([peaked_logits(12), np.random.default_rng(13).normal(0, 1, VOCAB).astype(np.float32)])
    lazy = LazyProbabilities(logits, SamplingParams(temperature=0.7))
    lazy.draw(0, np.random.default_rng(0))
    lazy.draw(1, np.random.default_rng(0))
    assert isinstance(lazy._row(0), PeakedRow) and isinstance(lazy._row(1), KeptWeights)  # the flat one
    for params in (SamplingParams(temperature=0.7, top_k=5), SamplingParams(temperature=0.7, top_p=0.9),
                   SamplingParams(temperature=0.7, min_p=0.1)):
        lazy = LazyProbabilities(logits, params)
        lazy.draw(0, np.random.default_rng(0))
        assert isinstance(lazy._row(0), KeptWeights)


@pytest.mark.parametrize("params", [SamplingParams(temperature=0.7), SamplingParams(temperature=0.9, top_k=6),
                                    SamplingParams(temperature=1.0, top_p=0.9), SamplingParams(temperature=1.0)])
def test_rejection_sampling_on_lazy_rows_emits_the_targets_distribution(params):
    """A deterministic draft (q = None) of the row's second likeliest token: the first token emitted,
    accepted or resampled from the rest, follows the target's row, whichever way the row is kept."""
    x = peaked_logits(14, tail=(-14.0, -3.0)) if params.temperature == 1.0 and params.top_p == 1.0 else peaked_logits(14)
    logits = np.stack([x, x])
    p = probabilities(logits, params)[0]
    draft = [int(np.argsort(-p)[1])]
    rng = np.random.default_rng(15)
    counts = np.zeros(VOCAB, np.int64)
    for _ in range(DRAWS):
        verdict = verify_sampling(draft, None, LazyProbabilities(logits, params), rng)
        counts[draft[0] if verdict.n_accepted else verdict.token] += 1
    ok, statistic, df = follows(counts, p.astype(np.float64) / p.sum(dtype=np.float64))
    assert ok, f"chi2={statistic:.1f} df={df}"
    lazy = LazyProbabilities(logits, params)
    verify_sampling(draft, None, lazy, rng)
    assert lazy.prob(0, draft[0]) == pytest.approx(float(p[draft[0]]), rel=1e-5)


def test_a_peaked_rows_probability_bounds_hold_its_probability_closely():
    x = peaked_logits(16)
    row, p = PeakedRow.of(x, 0.7), probabilities(x[None, :], SamplingParams(temperature=0.7))[0]
    for token in [int(np.argmax(x)), *np.argsort(-x)[1:6].tolist()]:
        low, high = row.prob_range(token)
        assert low <= float(p[token]) * (1 + 1e-6) and high >= float(p[token]) * (1 - 1e-6)
        assert high - low <= 1e-3 * high  # tight: the decision needs the exact value once in a thousand
    assert row._whole is None  # no pass over the vocabulary for them


@pytest.mark.parametrize("u, accepted, exact_reads", [(0.1, True, 0), (0.3, True, 1), (0.6, False, 1), (0.9, False, 0)])
def test_rejection_sampling_asks_the_exact_probability_only_between_its_bounds(u, accepted, exact_reads):
    rows = WideRows(0.2, 0.8)  # around the exact 0.5
    verdict = verify_sampling([1], None, rows, Uniform(u))
    assert (verdict.n_accepted == 1) == accepted and rows.exact_reads == exact_reads


FILTERS = [dict(top_p=0.9), dict(top_p=0.95), dict(top_p=0.5), dict(min_p=0.05), dict(top_p=0.95, min_p=0.02),
           dict(min_p=0.3), dict(top_k=5), dict(top_k=40, top_p=0.95, min_p=0.05), dict(top_k=20, top_p=0.8),
           dict(top_k=3, min_p=0.5)]


@pytest.mark.parametrize("filters", FILTERS)
@pytest.mark.parametrize("temperature", [0.3, 0.7, 1.0, 1.5])
def test_top_p_and_min_p_on_a_peaked_row_keep_what_the_whole_row_keeps(filters, temperature):
    """The kept tokens and their weights, token for token, as kept_weights finds them on the whole row
    (top-k's ids in either order: both come out of a partition)."""
    params = SamplingParams(temperature=temperature, **filters)
    settled = 0
    for seed in range(30):
        x = peaked_logits(seed)
        x[np.argsort(x)[-40:-13]] = np.linspace(-19.0, -4.0, 27, dtype=np.float32)  # a top-40 needs hot tokens beyond the 13
        row = peaked_filtered(x, params)
        if row is None:
            continue
        settled += 1
        (ids, weights), = kept_weights(x[None, :], params)
        mine, theirs = np.argsort(row.ids), np.argsort(ids)
        np.testing.assert_array_equal(row.ids[mine], ids[theirs])
        np.testing.assert_array_equal(row.weights[mine], weights[theirs])
    assert settled >= 25  # the peaked way is the usual one on such rows


def test_a_filtered_row_goes_the_whole_row_way_where_the_peaked_way_cannot_settle_it():
    flat = np.random.default_rng(17).normal(0, 1, VOCAB).astype(np.float32)
    assert peaked_filtered(flat, SamplingParams(temperature=1.0, top_p=0.9)) is None
    x = peaked_logits(18)
    assert peaked_filtered(x, SamplingParams(temperature=1.0, min_p=1e-12)) is None  # min-p below the cold bound
    assert peaked_filtered(x, SamplingParams(temperature=1.0, top_k=100)) is None  # fewer hot tokens than k
    assert peaked_filtered(x, SamplingParams(temperature=1.0, top_k=13, min_p=1e-12)) is not None  # all hot
    # Two hot tokens weighing 1 and 0.5 and a tail just under the cut: at top_p 2/3 the hot total's
    # nucleus ends at the first token, the hot total plus the cold tokens' bound at the second.
    straddled = np.full(VOCAB, -20.5, dtype=np.float32)
    straddled[:2] = [0.0, np.log(0.5)]
    assert peaked_filtered(straddled, SamplingParams(temperature=1.0, top_p=2 / 3)) is None
    assert peaked_filtered(straddled, SamplingParams(temperature=1.0, top_p=0.5)) is not None


def test_lazy_rows_with_top_p_draw_the_targets_distribution():
    x = peaked_logits(19)
    params = SamplingParams(temperature=0.8, top_p=0.9)
    assert peaked_filtered(x, params) is not None
    lazy = LazyProbabilities(x[None, :], params)
    rng = np.random.default_rng(20)
    counts = np.bincount([lazy.draw(0, rng) for _ in range(DRAWS)], minlength=VOCAB)
    p = probabilities(x[None, :], params)[0].astype(np.float64)
    ok, statistic, df = follows(counts, p / p.sum())
    assert ok, f"chi2={statistic:.1f} df={df}"


@pytest.mark.parametrize("params", [SamplingParams(temperature=0.7), SamplingParams(temperature=1.0, top_p=0.9),
                                    SamplingParams(temperature=1.0, min_p=0.05)])
def test_a_row_a_grammar_masked_draws_only_what_it_allows(params):
    """A grammar sets forbidden logits to -inf (decoding/grammar.py), the top token among them."""
    x = peaked_logits(22)
    x[np.argsort(-x)[:3]] = -np.inf
    p = probabilities(x[None, :], params)[0].astype(np.float64)
    lazy = LazyProbabilities(x[None, :], params)
    rng = np.random.default_rng(23)
    counts = np.bincount([lazy.draw(0, rng) for _ in range(DRAWS)], minlength=VOCAB)
    assert counts[np.isneginf(x)].sum() == 0
    ok, statistic, df = follows(counts, p / p.sum())
    assert ok, f"chi2={statistic:.1f} df={df}"
