"""scripts/measure/coupling_odds.py's couplings on rows whose answers are known: the same row is always the same
token, rows with nothing in common never are, and rows that share one token keep it as often as each way of
judging allows (in id order the rows' cumulative sums shift; shared Gumbel noise picks the shared token with its
weight among all the tokens either row can give)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.measure_scripts import fresh_script


@pytest.fixture
def coupling(monkeypatch):
    yield from fresh_script(monkeypatch, "coupling_odds")


def test_the_couplings_on_rows_with_known_answers(coupling):
    p, q = np.array([0.1, 0.9, 0.0]), np.array([0.0, 0.9, 0.1])
    rng = np.random.default_rng(3)
    assert coupling.by_id_order(p, p) == pytest.approx(1.0)
    assert coupling.by_id_order(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == pytest.approx(0.0)
    assert coupling.by_id_order(p, q) == pytest.approx(0.8)  # token 1's intervals [0.1, 1) and [0, 0.9)
    assert np.minimum(p, q).sum() == pytest.approx(0.9)  # the optimum it falls short of
    assert coupling.gumbel(p, p, rng) == 1.0
    assert coupling.gumbel(p, q, rng) == pytest.approx(0.9 / 1.1, abs=0.04)  # token 1 wins among 0.9, 0.1, 0.1
    assert coupling.softmax(np.log(np.array([1.0, 3.0])), 1.0) == pytest.approx([0.25, 0.75])
