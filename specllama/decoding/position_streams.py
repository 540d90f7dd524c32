"""One random stream per position of a text: the target's token at position t is drawn from stream t
alone, whatever was drafted before it or how the step was batched.

Why: with one stream a request, each step consumed draws in its own way (a uniform per judged draft,
one more for the target's token), so the same seed gave a different text with drafts than without,
and `--exact`, bit-identical to plain decoding when greedy, promised nothing at a temperature. Keyed
by position, a plain step at t draws its token from stream t, and a deterministic draft (the suffix
drafter's, a grammar's forced tokens) is judged by the same draw: the target draws its token at t
from stream t, and the draft's token there is accepted exactly when it is the one drawn. The token
each position gets is then the one plain decoding would have drawn from the same row; a draft is
accepted with probability p(x), as modified rejection sampling accepts a one-hot draft, and a
rejected one is replaced by a draw from p that is not x, which is its residual. So:
  - the distribution is the target's, exactly (the draws of different positions are independent);
  - with a seed, drafting does not change the text where the rows are the same: bit for bit under
    `--exact` (whose rows do not depend on the batch), else up to the batch's rounding of the logits;
  - a benchmark at a temperature compares plain and speculative decoding on the same text.
A sampling drafter's draft (the draft model's, drawn from q) is judged by rejection sampling as before,
its uniforms from the streams of the positions it judges (its own draws come from the request's own
generator, so the two stay independent).

Streams are Philox counters under one key a request (numpy's counter-based generator): moving to a
position is setting a counter (~2 us with a draw, warm, on the 2-core machine), where a generator
seeded per position costs ~7-15 us."""

from __future__ import annotations

import numpy as np

# Which spawned child of the request's seed keys the streams: the request's own generator
# (np.random.default_rng(seed)) is the seed's root, so the two never share a state.
STREAM_CHILD = 1


class PositionStreams:
    """The streams of one request: `at(t)` is a generator at the start of position t's stream. There is
    one generator under them: a later `at` moves it, so a position's draws are made before the next
    position's are asked for (verification judges one position at a time)."""

    def __init__(self, seed: int | None):
        key = np.random.SeedSequence(seed, spawn_key=(STREAM_CHILD,)).generate_state(2, np.uint64)
        self._bits = np.random.Philox(key=key)
        self._generator = np.random.Generator(self._bits)
        self._state = self._bits.state

    def at(self, position: int) -> np.random.Generator:
        state = self._state
        counter = state["state"]["counter"]
        counter[:] = 0
        counter[2] = position  # a word of its own: a position's draws advance word 0 only
        state["buffer_pos"] = len(state["buffer"])  # nothing buffered from another position
        state["has_uint32"] = 0
        self._bits.state = state
        return self._generator
