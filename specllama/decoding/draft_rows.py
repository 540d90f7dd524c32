"""A sampling drafter's q: for each drafted token, the distribution it was drawn from, kept as that
row's weights (target_rows.py: a peaked row's few hot tokens, a filter's kept few, or the whole row)
instead of a normalised 152k-float row.

Why: the draft model (and the MTP head) drew each token from `probabilities()`' whole row, then a
second pass over it to draw: ~360 us a drafted token on the 2-core machine, beside a draft decode of
~17 ms there but of ~3 ms on a GPU. Rejection sampling reads a drafted token's probability (bounds
settle it unless its uniform falls between them, as for the target's rows) and a whole normalised row
only where it rejects, once a step."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from specllama.decoding.target_rows import KeptWeights, PeakedRow, TargetRows

DraftRow = KeptWeights | PeakedRow  # one drafted token's row: target_rows.row_weights'


class DraftRows(TargetRows):
    """(drafted tokens, vocab) draft probabilities, immutable: a Proposal cuts them with [:n] and a
    grammar adds its forced tokens' one-hot rows with `plus`; rows[i] is row i normalised."""

    def __init__(self, rows: Sequence[DraftRow], vocab: int):
        self.rows = tuple(rows)
        self.shape = (len(self.rows), vocab)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return DraftRows(self.rows[i], self.shape[1])
        return self.rows[i].normalised(self.shape[1])

    def prob(self, i: int, token: int) -> float:
        return self.rows[i].prob(token)

    def prob_range(self, i: int, token: int) -> tuple[float, float]:
        return self.rows[i].prob_range(token)

    def draw(self, i: int, rng: np.random.Generator, without: int | None = None) -> int:
        return self.rows[i].draw(rng, without)

    def plus(self, tokens: Sequence[int]) -> "DraftRows":
        """These rows, then a one-hot row at each of `tokens` (deterministic drafts: a grammar's forced tokens)."""
        one_hot = [KeptWeights(np.array([t]), np.ones(1, dtype=np.float32)) for t in tokens]
        return DraftRows(self.rows + tuple(one_hot), self.shape[1])
