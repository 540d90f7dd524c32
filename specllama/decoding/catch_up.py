"""How the draft model catches up before it drafts: the tokens it has not seen (the last accepted
draft and the target's own token, usually two) ride in its first draft decode ("merged"), or go one
token a decode, the first without logits ("split"). Chosen by timing both ways on the machine.

Why both, and why not a rule: what a two-token decode costs against two one-token decodes is the
backend's and the model's. On the 2-core AMD machine the 0.5B draft's two-token decode costs 2.1
one-token decodes and a decode without logits skips the output layer (a quarter of its weights), so
split is 5 % cheaper a draft position at 4 positions (scripts/measure/decode_shapes.py,
bench/measured/vm-20261128-r10-catch-up); where a second token is nearly free (a larger draft) merged
wins. On CUDA, llama.cpp replays a captured graph only after two decodes in a row of the same shape
and captures again after every change (ggml-cuda.cu's graph warm-up), so merged drafting's 2,1,1
shapes run uncached: a draft token cost 3.6 ms in our loop on the lent H100 against 1.16 ms in
llama-bench, and the learnt draft cost c was 2.5-3.5 target steps on the H100 and H200 for a 0.5B draft
of a 1.5B target (bench/measured/lent-*-gpu-heldout-t0). A decode without logits has its own graph
there (llama-context.cpp keeps one per "has outputs"), so the split catch-up leaves the drafting
graph's shape alone (scripts/measure/catch_up_graphs.py shows it on a fake backend with the H100's costs).

The trial: a block of steps merged, then a block split, each block's first steps left out (they warm
the new shape's graph up), then the cheaper way a draft position, ties to merged (fewer decodes). It
counts steps that draft for one sequence after a usual catch-up; others use the current way uncounted.
"""

from __future__ import annotations

MERGED, SPLIT = "merged", "split"


class CatchUpChoice:
    BLOCK = 8  # counted steps a trial block drafts one way
    WARM = 2  # of them, the first ones: the backend's graphs warming up to the block's shapes
    MARGIN = 0.95  # split is kept where a draft position costs at most this share of merged's

    def __init__(self, fixed: str | None = None, trial: bool = False):
        """fixed: one way, no trial (--draft-one-token-decodes: split); trial: time both (the runtime's
        default); neither: merged, the way drafting went before the trial (the tests' fake drafts)."""
        if fixed not in (None, MERGED, SPLIT):
            raise ValueError(f"no such catch-up: {fixed!r}")
        self.chosen: str | None = fixed or (None if trial else MERGED)
        self.why = "fixed" if fixed else ("being timed" if trial else "untimed")
        self._order = (MERGED, SPLIT)
        self._block = self._steps = 0
        self._spent = {MERGED: [0.0, 0], SPLIT: [0.0, 0]}  # seconds and draft positions counted

    def mode(self) -> str:
        return self.chosen or self._order[self._block]

    def record(self, mode: str, seconds: float, positions: int) -> None:
        """A countable step's draft decodes (the catch-up's and every position's) and its positions."""
        if self.chosen is not None or mode != self.mode() or positions <= 0:
            return
        self._steps += 1
        if self._steps > self.WARM:
            spent = self._spent[mode]
            spent[0] += seconds
            spent[1] += positions
        if self._steps == self.BLOCK:
            self._block, self._steps = self._block + 1, 0
            if self._block == len(self._order):
                self._decide()

    def per_position(self, mode: str) -> float | None:
        seconds, positions = self._spent[mode]
        return seconds / positions if positions else None

    def _decide(self) -> None:
        merged, split = self.per_position(MERGED), self.per_position(SPLIT)
        self.chosen = SPLIT if split <= merged * self.MARGIN else MERGED
        self.why = f"timed: a draft position {split * 1e3:.2f} ms split, {merged * 1e3:.2f} ms merged"

    def describe(self) -> str:
        """For bench and --stats: the way in force and why."""
        return f"{self.mode()} ({self.why})"
