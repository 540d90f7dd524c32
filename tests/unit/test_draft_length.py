"""Draft length from per-token confidence and the machine's cost curve; the calibrator."""

import itertools
import random

import pytest

from specllama.decoding.acceptance import Calibrator
from specllama.decoding.cost.model import best_length, expected_tokens


def curve(values):
    """ratio(n) from a list: values[n-1] = T(n)/T(1), None beyond it."""
    return lambda n: values[n - 1] if 1 <= n <= len(values) else None


FLAT = curve([1.0] * 17)
STEEP = curve([float(n) for n in range(1, 18)])  # each verified token costs a full decode
CPU_2CORE = curve([1.0, 1.3, 1.61, 1.9, 2.2, 2.5, 2.8, 3.1, 3.4])


def brute_best(acceptance, ratio):
    rates = [(expected_tokens(acceptance)[k] / ratio(k + 1), -k) for k in range(len(acceptance) + 1)
             if ratio(k + 1) is not None]
    return -max(rates)[1]


def test_expected_tokens_chains_acceptance():
    assert expected_tokens([]) == [1.0]
    assert expected_tokens([0.5, 0.5]) == pytest.approx([1.0, 1.5, 1.75])
    assert expected_tokens([1.0, 0.0, 1.0]) == pytest.approx([1.0, 2.0, 2.0, 2.0])


def test_flat_curve_drafts_everything_that_may_be_accepted():
    assert best_length([0.3] * 8, FLAT) == 8
    assert best_length([0.9, 0.9, 0.0, 0.9], FLAT) == 2  # past a certain rejection: no gain


def test_steep_curve_drafts_nothing_unless_certain():
    assert best_length([0.9] * 8, STEEP) == 0
    assert best_length([1.0] * 8, STEEP) == 0  # a tie with plain decoding goes to shorter


def test_two_core_curve_follows_confidence():
    assert best_length([0.2] * 8, CPU_2CORE) == 0
    high = best_length([0.95] * 8, CPU_2CORE)
    assert high >= 4
    assert best_length([0.95] * 3 + [0.1] * 5, CPU_2CORE) == 3


def test_unmeasured_lengths_are_never_chosen():
    assert best_length([1.0] * 10, curve([1.0, 1.0, 1.0])) == 2


def test_monotone_in_confidence_and_in_cost():
    for a in range(1, 10):
        lo, hi = a / 10, a / 10 + 0.05
        assert best_length([lo] * 8, CPU_2CORE) <= best_length([hi] * 8, CPU_2CORE)
        cheaper = curve([1.0 + (r - 1.0) / 2 for r in [CPU_2CORE(n) for n in range(1, 10)]])
        assert best_length([lo] * 8, CPU_2CORE) <= best_length([lo] * 8, cheaper)


def test_choice_is_the_argmax_over_all_lengths():
    rng = random.Random(5)
    for _ in range(500):
        ratios = list(itertools.accumulate([1.0] + [rng.choice([0.0, 0.05, 0.3, 1.0]) for _ in range(10)]))
        acc = [rng.random() for _ in range(rng.randint(0, 10))]
        assert best_length(acc, curve(ratios)) == brute_best(acc, curve(ratios))


def test_a_step_in_the_curve_is_looked_past():
    # verifying 2 costs a jump, 3 and 4 nothing more: one draft loses, three win
    stairs = curve([1.0, 1.8, 1.8, 1.8])
    acc = [0.5, 0.95, 0.95]
    assert expected_tokens(acc[:1])[1] / 1.8 < 1.0
    assert best_length(acc, stairs) == 3


def test_calibrator_starts_at_raw_and_converges_to_observed():
    cal = Calibrator(bins=10, prior_weight=4.0)
    assert cal.predict(0.85) == pytest.approx(0.85)
    rng = random.Random(0)
    for _ in range(2000):  # this drafter is overconfident: raw 0.85 is accepted 40 % of the time
        cal.update(0.85, rng.random() < 0.4)
    assert cal.predict(0.85) == pytest.approx(0.4, abs=0.04)
    assert cal.predict(0.15) == pytest.approx(0.15)  # other bins untouched
    row = [r for r in cal.report() if r.low <= 0.85 < r.high][0]
    assert row.count == 2000 and row.observed == pytest.approx(0.4, abs=0.04)
    assert row.predicted == pytest.approx(cal.predict(0.85))
    assert [r.observed for r in cal.report() if r.count == 0] == [None] * 9


def test_calibrator_groups_are_separate():
    cal = Calibrator(bins=4, groups=2, prior_weight=1.0)
    for _ in range(50):
        cal.update(0.6, True, group=1)
        cal.update(0.6, False, group=0)
    assert cal.predict(0.6, group=1) > 0.95 and cal.predict(0.6, group=0) < 0.05
    assert len(cal.report()) == 8


def test_observe_judges_accepted_prefix_and_first_rejection_only():
    cal = Calibrator(bins=10, prior_weight=1.0)
    raw = [0.05, 0.15, 0.25, 0.35, 0.45]
    cal.observe(raw, n_sent=5, n_accepted=2)
    judged = {r.low: (r.count, r.observed) for r in cal.report() if r.count}
    assert judged == {0.0: (1, 1.0), 0.1: (1, 1.0), 0.2: (1, 0.0)}
    cal.observe(raw, n_sent=3, n_accepted=3)  # all sent accepted: nothing after was judged
    assert sum(r.count for r in cal.report()) == 6
