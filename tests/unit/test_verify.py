"""Tests for specllama.decoding.verify: exact greedy rules, and a chi-square check that rejection sampling
emits tokens distributed exactly as the target's own distribution p."""


import numpy as np
import pytest

from specllama.decoding.sampling import SamplingParams, probabilities, sample
from specllama.decoding.target_rows import LazyProbabilities
from specllama.decoding.verify import RESIDUAL_ATTEMPTS, Verdict, verify_greedy, verify_sampling
from tests.support.chi_square import chi_square_critical, follows

DRAWS = 100_000


# ---------------------------------------------------------------------------------------------
# Greedy
# ---------------------------------------------------------------------------------------------


def one_hot_logits(choices, vocab=10):
    """Logits whose argmax in row i is choices[i]."""
    logits = np.zeros((len(choices), vocab), dtype=np.float32)
    logits[np.arange(len(choices)), choices] = 5.0
    return logits


def test_greedy_all_accepted_takes_bonus_from_last_row():
    verdict = verify_greedy([3, 1, 4], one_hot_logits([3, 1, 4, 7]))
    assert verdict == Verdict(n_accepted=3, token=7, bonus=True)


def test_greedy_first_rejected_returns_target_argmax():
    verdict = verify_greedy([3, 1, 4], one_hot_logits([2, 1, 4, 7]))
    assert verdict == Verdict(n_accepted=0, token=2, bonus=False)


def test_greedy_mismatch_in_the_middle_stops_there():
    # Row 2 onwards would accept again, but verification must stop at the first disagreement.
    verdict = verify_greedy([3, 1, 4, 1], one_hot_logits([3, 1, 9, 1, 5]))
    assert verdict == Verdict(n_accepted=2, token=9, bonus=False)


def test_greedy_single_draft_token():
    assert verify_greedy([6], one_hot_logits([6, 0])) == Verdict(1, 0, True)
    assert verify_greedy([6], one_hot_logits([5, 0])) == Verdict(0, 5, False)


def test_greedy_without_draft_is_plain_decoding():
    assert verify_greedy([], one_hot_logits([8])) == Verdict(n_accepted=0, token=8, bonus=True)


def test_greedy_ties_resolve_to_lowest_id():
    logits = np.zeros((2, 10), dtype=np.float32)
    logits[:, [7, 2]] = 3.0  # two equal maxima per row
    assert verify_greedy([2], logits) == Verdict(1, 2, True)
    assert verify_greedy([7], logits) == Verdict(0, 2, False)


def test_greedy_rejects_wrong_number_of_rows():
    with pytest.raises(ValueError):
        verify_greedy([1, 2], one_hot_logits([1, 2]))


# ---------------------------------------------------------------------------------------------
# Sampling: chi-square machinery
# ---------------------------------------------------------------------------------------------


def test_chi_square_critical_matches_tables():
    # Table values at alpha = 1e-3: df 5 -> 20.515, df 9 -> 27.877. Wilson–Hilferty overshoots a
    # little this far in the tail at small df (about 1%), which only makes the tests slightly lenient.
    assert chi_square_critical(5) == pytest.approx(20.515, rel=0.02)
    assert chi_square_critical(9) == pytest.approx(27.877, rel=0.02)


def emitted_counts(verifier, p, q_rows, q_arg, seed, draws=DRAWS):
    """Run `verifier` `draws` times; draft token i is drawn from q_rows[i]. Returns counts of the first
    emitted token, and of the second emitted token over the steps that accepted the first."""
    rng = np.random.default_rng(seed)
    vocab = p.shape[1]
    k = q_rows.shape[0]
    drafts = np.stack([rng.choice(vocab, size=draws, p=q_rows[i] / q_rows[i].sum()) for i in range(k)], axis=1)
    first, second = np.zeros(vocab, np.int64), np.zeros(vocab, np.int64)
    for draft in drafts.tolist():
        verdict = verifier(draft, q_arg, p, rng)
        emitted = draft[: verdict.n_accepted] + [verdict.token]
        first[emitted[0]] += 1
        if len(emitted) > 1:
            second[emitted[1]] += 1
    return first, second


def random_rows(rng, rows, vocab, support=None):
    """Dirichlet rows, optionally zero outside `support`."""
    values = rng.dirichlet(np.ones(vocab), size=rows)
    if support is not None:
        mask = np.zeros(vocab, bool)
        mask[list(support)] = True
        values = np.where(mask, values, 0.0)
        values /= values.sum(axis=1, keepdims=True)
    return values


# ---------------------------------------------------------------------------------------------
# Sampling: distribution tests
# ---------------------------------------------------------------------------------------------


def test_random_p_and_q_first_and_second_token_follow_p():
    rng = np.random.default_rng(11)
    p, q = random_rows(rng, 3, 8), random_rows(rng, 2, 8)
    first, second = emitted_counts(verify_sampling, p, q, q, seed=1)
    ok, statistic, df = follows(first, p[0])
    assert ok, f"first token: chi2={statistic:.1f} df={df}"
    # p[1] does not depend on the first token here, so given it was accepted the next emitted token
    # (accepted draft[1] or the correction) must follow p[1].
    ok, statistic, df = follows(second, p[1])
    assert ok, f"second token: chi2={statistic:.1f} df={df}"


def test_q_with_mass_where_p_has_none():
    rng = np.random.default_rng(12)
    p = random_rows(rng, 2, 8, support=[0, 1, 2, 3, 4])
    q = random_rows(rng, 1, 8)  # proposes 5, 6, 7 too, which p forbids
    first, _ = emitted_counts(verify_sampling, p, q, q, seed=2)
    ok, statistic, df = follows(first, p[0])
    assert ok, f"chi2={statistic:.1f} df={df}"


def test_disjoint_supports_always_reject_and_follow_p():
    rng = np.random.default_rng(13)
    p = random_rows(rng, 2, 8, support=[0, 1, 2, 3])
    q = random_rows(rng, 1, 8, support=[4, 5, 6, 7])
    first, _ = emitted_counts(verify_sampling, p, q, q, seed=3)
    ok, statistic, df = follows(first, p[0])
    assert ok, f"chi2={statistic:.1f} df={df}"


@pytest.mark.parametrize("fixed_draft", [0, 5, 7])  # likely, unlikely and impossible under p
def test_deterministic_proposal_q_none_follows_p(fixed_draft):
    p = np.array([[0.40, 0.20, 0.15, 0.10, 0.08, 0.05, 0.02, 0.00]] * 2)
    q_rows = np.zeros((1, 8))
    q_rows[0, fixed_draft] = 1.0  # the draft always proposes the same token
    first, _ = emitted_counts(verify_sampling, p, q_rows, None, seed=4 + fixed_draft)
    ok, statistic, df = follows(first, p[0])
    assert ok, f"chi2={statistic:.1f} df={df}"


def test_transformed_logits_follow_target_distribution():
    # Target and draft are different models: different logits, same transform (temperature 0.7,
    # top_p 0.9), so their supports differ as well as their weights.
    rng = np.random.default_rng(14)
    params = SamplingParams(temperature=0.7, top_p=0.9)
    p = probabilities(rng.normal(0, 1.5, (2, 10)).astype(np.float32), params)
    q = probabilities(rng.normal(0, 1.5, (1, 10)).astype(np.float32), params)
    first, _ = emitted_counts(verify_sampling, p, q, q, seed=5)
    ok, statistic, df = follows(first, p[0])
    assert ok, f"chi2={statistic:.1f} df={df}"


def always_accept(draft, q, p, rng):
    """Wrong: emits the draft's tokens untouched, i.e. samples from q."""
    return Verdict(n_accepted=len(draft), token=sample(p[len(draft)], rng), bonus=True)


def resample_from_p_on_rejection(draft, q, p, rng):
    """Wrong in the classic subtle way: after a rejection it samples p instead of max(0, p - q),
    which over-weights tokens the draft already proposes often."""
    for i, x in enumerate(draft):
        if rng.random() * q[i, x] >= p[i, x]:
            return Verdict(n_accepted=i, token=sample(p[i], rng), bonus=False)
    return Verdict(n_accepted=len(draft), token=sample(p[len(draft)], rng), bonus=True)


@pytest.mark.parametrize("wrong_verifier", [always_accept, resample_from_p_on_rejection])
def test_check_can_fail_for_a_wrong_verifier(wrong_verifier):
    rng = np.random.default_rng(11)
    p, q = random_rows(rng, 3, 8), random_rows(rng, 2, 8)
    first, _ = emitted_counts(wrong_verifier, p, q, q, seed=1)
    ok, statistic, df = follows(first, p[0])
    assert not ok, f"the check did not notice {wrong_verifier.__name__} (chi2={statistic:.1f} df={df})"


# ---------------------------------------------------------------------------------------------
# Sampling: exact cases
# ---------------------------------------------------------------------------------------------


def test_identical_p_and_q_accepts_everything():
    rng = np.random.default_rng(0)
    p = random_rows(rng, 4, 8)
    for _ in range(200):
        draft = [int(rng.choice(8, p=p[i])) for i in range(3)]
        verdict = verify_sampling(draft, p[:3], p, rng)
        assert verdict.n_accepted == 3 and verdict.bonus


def test_draft_token_the_target_forbids_is_always_rejected():
    p = np.array([[0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3]])
    rng = np.random.default_rng(0)
    for _ in range(100):
        verdict = verify_sampling([2], None, p, rng)
        assert verdict.n_accepted == 0 and verdict.token in (0, 1) and not verdict.bonus


class ScriptedRandom:
    """Stands in for np.random.Generator with a fixed sequence of uniforms."""

    def __init__(self, values):
        self.values = list(values)

    def random(self):
        return self.values.pop(0)


def test_empty_residual_falls_back_to_p():
    # p is q shrunk by rounding-sized amounts, so max(0, p - q) is zero everywhere; a near-1 uniform
    # still rejects the draft. Every draw from p the residual's rejection tries is turned away (a draw
    # and a keep uniform each); the verifier must then sample from p instead of an empty row.
    q = np.array([[0.25, 0.25, 0.5, 0.0]])
    p = np.vstack([q[0] * (1 - 1e-7), [0.25] * 4])
    uniforms = [0.99999999] + [0.6, 0.5] * RESIDUAL_ATTEMPTS + [0.6]
    verdict = verify_sampling([2], q, p, ScriptedRandom(uniforms))
    assert verdict == Verdict(n_accepted=0, token=2, bonus=False)


def test_no_draft_samples_from_p():
    p = np.array([[0.0, 1.0, 0.0]])
    assert verify_sampling([], None, p, np.random.default_rng(0)) == Verdict(0, 1, True)


def test_a_verdict_says_the_odds_each_judged_draft_was_accepted_with():
    """What acceptance estimates learn from (outcome.StepOutcome.odds): 1/0 when greedy; under
    sampling p(x) for a deterministic draft and min(1, p/q) for a sampled one, up to the first
    rejection (later drafts were never judged)."""
    logits = np.array([[0, 5, 0, 0], [0, 0, 5, 0], [5, 0, 0, 0]], dtype=np.float32)
    assert verify_greedy([1, 3], logits).odds == (1.0, 0.0)
    assert verify_greedy([1, 2], logits).odds == (1.0, 1.0)
    p = np.array([[0.1, 0.8, 0.1, 0.0], [0.0, 0.3, 0.6, 0.1], [0.25] * 4])
    accepted_both = verify_sampling([1, 2], None, p, ScriptedRandom([0.0, 0.0, 0.5]))
    assert accepted_both.n_accepted == 2 and accepted_both.odds == pytest.approx((0.8, 0.6))
    q = np.array([[0.0, 0.4, 0.6, 0.0], [0.0, 0.0, 1.0, 0.0]])
    # rejected at 2 (0.99 * q 1.0 >= p 0.6); the residual's first draw from p (token 2, where q covers p)
    # is turned away, its second (token 1, which q never proposes) kept
    rejected_second = verify_sampling([1, 2], q, p, ScriptedRandom([0.0, 0.99, 0.5, 0.0, 0.1, 0.0]))
    assert rejected_second.n_accepted == 1 and rejected_second.odds == pytest.approx((1.0, 0.6))


def test_greedy_from_argmax_ids_is_the_verdict_from_whole_rows():
    rng = np.random.default_rng(3)
    for _ in range(200):
        k = int(rng.integers(0, 6))
        logits = rng.standard_normal((k + 1, 12)).astype(np.float32)
        best = np.argmax(logits, axis=1)
        draft = [int(t) if rng.random() < 0.7 else int(rng.integers(0, 12)) for t in best[:k]]
        assert verify_greedy(draft, best) == verify_greedy(draft, logits)
    with pytest.raises(ValueError):
        verify_greedy([1, 2], np.array([1, 2]))  # K + 1 ids are needed


def test_lazy_rows_are_the_blocks_rows_and_only_those_read_are_transformed():
    rng = np.random.default_rng(4)
    logits = (rng.standard_normal((6, 50)) * 2).astype(np.float32)
    params = SamplingParams(temperature=0.7, top_k=20, top_p=0.9, min_p=0.02)
    lazy, block = LazyProbabilities(logits, params), probabilities(logits, params)
    for i in (4, 0, 4):
        np.testing.assert_array_equal(lazy[i], block[i])
    assert lazy.computed == 2
    # A draft whose first token the target forbids: rejection at row 0 reads row 0 alone.
    draft = [int(np.argmin(block[0])), 1, 2, 3, 4]
    lazy = LazyProbabilities(logits, params)
    verdict = verify_sampling(draft, None, lazy, np.random.default_rng(0))
    assert verdict.n_accepted == 0 and lazy.computed == 1
