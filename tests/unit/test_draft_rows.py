"""Tests for a sampling drafter's q kept as row weights (specllama.decoding.draft_rows): the drafted
tokens follow the draft's `probabilities()` row, rejection sampling against them still emits the
target's distribution (chi-square), exact values are read only where bounds do not settle a decision,
p_min reads the same top probability, and a draft position's cost includes choosing its token."""

import numpy as np
import pytest

from specllama.decoding import drafters
from specllama.decoding.draft_rows import DraftRows
from specllama.decoding.drafters import DraftRequest, ModelDrafter, _choose
from specllama.decoding.grammar import _append
from specllama.decoding.proposal import Proposal
from specllama.decoding.request import GenerationConfig
from specllama.decoding.sampling import SamplingParams, probabilities
from specllama.decoding.target_rows import KeptWeights, LazyProbabilities, PeakedRow, row_weights
from specllama.decoding.verify import RESIDUAL_ATTEMPTS, draw_residual, verify_sampling
from tests.support.chi_square import follows
from tests.support.fake_llm import FakeClock, FakeContext, counting_rule
from tests.support.peaked_rows import DRAWS, VOCAB, ColdNear, Uniform, WideRows, peaked_logits

PARAMS = [SamplingParams(temperature=0.7), SamplingParams(temperature=1.0, top_p=0.9),
          SamplingParams(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05)]


def request(params: SamplingParams, seed: int, p_min: float = 0.0) -> DraftRequest:
    return DraftRequest(0, [1, 2, 3], 1, GenerationConfig(sampling=params, p_min=p_min), np.random.default_rng(seed))


@pytest.mark.parametrize("params", PARAMS)
def test_drafted_tokens_follow_the_drafts_row(params):
    x = peaked_logits(21)
    r = request(params, 22)
    counts = np.bincount([_choose(x, r)[0] for _ in range(DRAWS)], minlength=VOCAB)
    q = probabilities(x[None, :], params)[0].astype(np.float64)
    ok, statistic, df = follows(counts, q / q.sum())
    assert ok, f"chi2={statistic:.1f} df={df}"


@pytest.mark.parametrize("params", PARAMS)
def test_rejection_sampling_against_drafted_rows_emits_the_targets_distribution(params):
    """Draft and target are different models (their rows differ); the draft's token and its row come
    from `_choose`, the target's rows are lazy: the first token emitted follows the target's row."""
    target_x = peaked_logits(23)
    near = np.argsort(-target_x)[:13]  # the target's plausible tokens, weighed otherwise by the draft
    draft_x = target_x.copy()
    draft_x[near] += np.random.default_rng(24).normal(0.0, 1.5, near.size).astype(np.float32)
    logits = np.stack([target_x, target_x])
    p = probabilities(logits, params)[0].astype(np.float64)
    r = request(params, 25)
    counts, accepted = np.zeros(VOCAB, np.int64), 0
    for _ in range(DRAWS):
        token, row = _choose(draft_x, r)
        assert isinstance(row, (PeakedRow, KeptWeights))
        verdict = verify_sampling([token], DraftRows([row], VOCAB), LazyProbabilities(logits, params), r.rng)
        counts[token if verdict.n_accepted else verdict.token] += 1
        accepted += verdict.n_accepted
    assert 0.1 * DRAWS < accepted < 0.9 * DRAWS
    ok, statistic, df = follows(counts, p / p.sum())
    assert ok, f"chi2={statistic:.1f} df={df}"


def test_drafted_rows_are_the_rows_probabilities_gives():
    x = peaked_logits(26)
    params = SamplingParams(temperature=0.7)
    q = probabilities(x[None, :], params)[0]
    token, row = _choose(x, request(params, 27))
    rows = DraftRows([row], VOCAB)
    low, high = rows.prob_range(0, token)
    assert low <= q[token] * (1 + 1e-6) and high >= q[token] * (1 - 1e-6) and high - low <= 1e-3 * high
    assert rows.prob(0, token) == pytest.approx(float(q[token]), rel=1e-5)
    np.testing.assert_allclose(rows[0], q, rtol=1e-5, atol=1e-12)
    assert rows.shape == (1, VOCAB) and rows[:0].shape == (0, VOCAB)


class Fixed(KeptWeights):
    """A target row that gives 0.25 for every token, exactly."""

    def __init__(self):
        super().__init__(None, np.full(4, 1.0, dtype=np.float32))


@pytest.mark.parametrize("u, accepted, exact_reads", [(0.3, True, 0), (0.45, True, 1), (0.55, False, 1), (0.7, False, 0)])
def test_the_drafts_exact_probability_is_read_only_where_its_bounds_do_not_settle(u, accepted, exact_reads):
    """Accepted when u * q_x < p_x = 0.25: with q_x in (0.4, 0.6), u 0.3 settles it (0.18 < 0.25), u 0.7
    too (0.28 >= 0.25); between, only the exact 0.5 says (0.225 accepted, 0.275 not)."""
    q = WideRows(0.4, 0.6, rows=1)  # a draft row's bounds around the exact 0.5
    target = DraftRows([Fixed(), Fixed()], 4)
    verdict = verify_sampling([1], q, target, Uniform(u))
    assert (verdict.n_accepted == 1) == accepted and q.exact_reads == exact_reads


@pytest.mark.parametrize("p_min", [0.2, 0.5, 0.9])
def test_p_min_reads_the_drafts_top_probability(p_min):
    """ColdNear's bounds on the top probability are wide (the cold tokens weigh close to the bound):
    where they do not settle p_min the exact top decides, as probabilities() would."""
    x = peaked_logits(28, tail=(-2.5, -1.05), vocab=120)
    params = SamplingParams(temperature=1.0)
    top = float(probabilities(x[None, :], params)[0].max())
    original = drafters.row_weights
    try:
        drafters.row_weights = lambda logits, p: ColdNear.of(np.asarray(logits, np.float32), p.temperature)
        token, _ = _choose(x, request(params, 29, p_min=p_min))
    finally:
        drafters.row_weights = original
    assert (token is None) == (top < p_min)


def test_a_p_min_the_bounds_cannot_settle_reads_the_whole_row():
    x = peaked_logits(28, tail=(-2.5, -1.05), vocab=120)
    row = ColdNear.of(x, 1.0)
    low, high = row.top_range()
    top = float(probabilities(x[None, :], SamplingParams(temperature=1.0))[0].max())
    assert low <= top <= high and high - low > 0.01  # wide here: p_min between them needs the exact top
    assert row.whole().top_range() == pytest.approx((top, top), rel=1e-5)


def test_forced_tokens_after_drafted_rows_are_one_hot_and_cut_together():
    x = peaked_logits(30)
    params = SamplingParams(temperature=0.7)
    token, row = _choose(x, request(params, 31))
    proposal = _append(Proposal((token,), DraftRows([row], VOCAB), source="model"), [7, 9], "grammar")
    q = proposal.q
    assert isinstance(q, DraftRows) and q.shape == (3, VOCAB)
    assert q.prob(1, 7) == 1.0 and q.prob(2, 9) == 1.0 and q.prob(2, 7) == 0.0
    assert proposal.keep(2).q.shape == (2, VOCAB) and proposal.keep(2).q.rows == q.rows[:2]


def test_a_draft_position_costs_its_decode_and_choosing_its_token(monkeypatch):
    """Choosing a token from a position's logits (a sampled row worked out, a draw) is that position's
    cost, as judging is part of T(n); a long catch-up's first decode is neither counted nor its choice."""
    clock = FakeClock()
    ctx = FakeContext(counting_rule(), clock=clock, cost=lambda rows: 1.0)
    drafter = ModelDrafter(ctx, clock=clock)
    choose = drafters._choose

    def slow_choose(logits, r):
        clock.now += 0.25
        return choose(logits, r)

    monkeypatch.setattr(drafters, "_choose", slow_choose)
    drafter.prefill(0, [5, 6, 7])
    rng = np.random.default_rng(0)
    drafter.propose([DraftRequest(0, [5, 6, 7], 3, GenerationConfig(), rng)])
    assert drafter.timing() == (3, pytest.approx(3 * 1.0 + 3 * 0.25))
    committed = [5, 6, 7, 8, 9, 10, 11, 12, 13]  # six tokens it has not seen: not a usual catch-up
    drafter.rollback(0, 3)
    drafter.propose([DraftRequest(0, committed, 3, GenerationConfig(), rng)])
    assert drafter.timing() == (3 + 2, pytest.approx(3 * 1.25 + 2 * 1.25))


@pytest.mark.parametrize("attempts", [RESIDUAL_ATTEMPTS, 1, 0])
@pytest.mark.parametrize("shift", [1.5, 0.05])  # rows far apart (most attempts kept) and close (most fall back)
def test_the_residual_drawn_by_rejection_from_p_is_max_p_minus_q(attempts, shift):
    """Drawn from p and kept with (p - q)+ / p, each decided on bounds, the whole rows' residual after
    `attempts` failures (0: that alone): every way gives max(0, p - q) renormalised."""
    params = SamplingParams(temperature=0.7)
    target_x = peaked_logits(32)
    near = np.argsort(-target_x)[:13]
    draft_x = target_x.copy()
    draft_x[near] += np.random.default_rng(33).normal(0.0, shift, near.size).astype(np.float32)
    p_rows = LazyProbabilities(target_x[None, :], params)
    q_rows = DraftRows([row_weights(draft_x, params)], VOCAB)
    p, q = probabilities(target_x[None, :], params)[0], probabilities(draft_x[None, :], params)[0]
    residual = np.maximum(p.astype(np.float64) - q, 0.0)
    rng = np.random.default_rng(34)
    counts = np.bincount([draw_residual(p_rows, q_rows, 0, rng, attempts) for _ in range(DRAWS // 3)], minlength=VOCAB)
    ok, statistic, df = follows(counts, residual / residual.sum())
    assert ok, f"chi2={statistic:.1f} df={df}"


def test_the_residual_reads_exact_probabilities_only_where_bounds_straddle():
    """A draw of token 1 from p = 0.25 exactly, q's bounds (0.4, 0.6) around 0.5: kept when q < keep * p
    never holds (0.4 >= keep * 0.25 for every keep <= 1), so no exact read and every attempt turned away."""
    q = WideRows(0.4, 0.6, rows=1)  # a draft row's bounds around the exact 0.5
    target = DraftRows([Fixed()], 4)
    draws = iter([1] * RESIDUAL_ATTEMPTS)
    target.draw = lambda i, rng, without=None: next(draws, 0)
    token = draw_residual(target, q, 0, np.random.default_rng(35))
    assert q.exact_reads == 0 and token in range(4)
