"""A chi-square goodness-of-fit check without scipy: does a sampler's histogram follow a distribution?"""

from __future__ import annotations

import math

import numpy as np

SIGNIFICANCE = 1e-3


def upper_normal_quantile(alpha):
    """z with P(Z > z) = alpha, by bisection on erfc (no scipy)."""
    low, high = 0.0, 40.0
    for _ in range(200):
        middle = (low + high) / 2
        if 0.5 * math.erfc(middle / math.sqrt(2)) > alpha:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def chi_square_critical(df, alpha=SIGNIFICANCE):
    """Wilson–Hilferty: (X/df)^(1/3) is close to normal with mean 1 - 2/(9df), variance 2/(9df)."""
    z = upper_normal_quantile(alpha)
    h = 2.0 / (9.0 * df)
    return df * (1.0 - h + z * math.sqrt(h)) ** 3


def chi_square_statistic(counts, expected_probs):
    """Pearson statistic and degrees of freedom. Cells with expected count < 5 are pooled so the
    chi-square approximation holds; a token with zero target probability must never appear."""
    counts = np.asarray(counts, dtype=np.float64)
    expected = counts.sum() * np.asarray(expected_probs, dtype=np.float64)
    impossible = expected == 0
    assert counts[impossible].sum() == 0, f"emitted tokens the target forbids: {np.flatnonzero(impossible & (counts > 0))}"
    small = ~impossible & (expected < 5)
    observed_cells = list(counts[~impossible & ~small])
    expected_cells = list(expected[~impossible & ~small])
    if small.any():
        observed_cells.append(counts[small].sum())
        expected_cells.append(expected[small].sum())
    observed_cells, expected_cells = np.array(observed_cells), np.array(expected_cells)
    statistic = float(((observed_cells - expected_cells) ** 2 / expected_cells).sum())
    return statistic, len(observed_cells) - 1


def follows(counts, expected_probs):
    statistic, df = chi_square_statistic(counts, expected_probs)
    return statistic < chi_square_critical(df), statistic, df
