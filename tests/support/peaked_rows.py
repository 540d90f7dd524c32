"""Rows shaped like a real model's (a few plausible tokens, the rest far below), for the tests of
target_rows.py and draft_rows.py."""

import numpy as np

from specllama.decoding.target_rows import PeakedRow, TargetRows
from tests.support import fake_llm

DRAWS = 30_000
VOCAB = 3000


def peaked_logits(seed: int, tail: tuple[float, float] = (-60.0, -22.0), vocab: int = VOCAB) -> np.ndarray:
    """A real model's shape at small scale: a dozen plausible tokens near the top, the rest far below."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(*tail, vocab).astype(np.float32)
    x[rng.choice(vocab, 12, replace=False)] = rng.uniform(-3.0, 0.0, 12).astype(np.float32)
    x[rng.integers(vocab)] = 0.0
    return x


class ColdNear(PeakedRow):
    """Cold tokens close to the bound: most draws go the cold way and are kept there."""
    COLD = 1.0


class Uniform:
    """A generator whose every random() is `value`: a test picks the uniform rejection sampling reads."""

    def __init__(self, value):
        self.value = value

    def random(self):
        return self.value


def peaked(tokens):
    """A fake context's rule (tests/support/fake_llm.py): two likely next tokens, the rest of the
    vocabulary ~50 nats below: a real model's shape."""
    row = np.full(fake_llm.VOCAB, -50.0, dtype=np.float32)
    row[3 + len(tokens) % 5] = 5.0
    row[4 + len(tokens) % 7] = 4.0
    return row


class WideRows(TargetRows):
    """Rows over a 4-token vocabulary whose every probability has wide bounds (low, high) around the
    exact 0.5, counting the exact reads (a test's check that bounds settle what they can); a draw gives
    token 3, a whole row is uniform."""

    def __init__(self, low: float, high: float, rows: int = 2):
        self.bounds, self.shape = (low, high), (rows, 4)
        self.exact_reads = 0

    def __getitem__(self, i):
        return np.full(self.shape[1], 1.0 / self.shape[1], dtype=np.float32)

    def prob(self, i, token):
        self.exact_reads += 1
        return 0.5

    def prob_range(self, i, token):
        return self.bounds

    def draw(self, i, rng, without=None):
        return 3
