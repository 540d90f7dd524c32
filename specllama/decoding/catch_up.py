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
Steps are priced apart by their catch-up, one token (after a rejection: the same decodes either way on
a CPU) or two (after a draft accepted whole), and the two ways compared on one shared mix of them: on
the 2-core machine, where a draft of 4 is accepted whole about a quarter of the time, blocks of 6 steps
drew anywhere from 0 to 4 such steps, and that mix alone moved a block's cost a position by more than
the 4 % the split saves (bench/measured/vm-20261128-r10-catch-up: the first trial kept merged three times
out of three while split measured 3.7 % cheaper a drafted token over whole runs).
"""

from __future__ import annotations

MERGED, SPLIT = "merged", "split"


class CatchUpChoice:
    BLOCK = 8  # counted steps a trial block drafts one way, at the least
    WARM = 2  # of them, the first ones: the backend's graphs warming up to the block's shapes
    TWO_TOKEN_STEPS = 3  # a block goes on until it has timed this many two-token catch-ups
    LONGEST = 48  # ... or this many steps: where whole drafts are that rare, the way matters little
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
        # Per way and catch-up (one token or two): seconds, draft positions and steps counted.
        self._spent = {(mode, two): [0.0, 0, 0] for mode in self._order for two in (False, True)}

    def mode(self) -> str:
        return self.chosen or self._order[self._block]

    def record(self, mode: str, seconds: float, positions: int, caught_up: int) -> None:
        """A countable step: its draft decodes' seconds (the catch-up's and every position's), its
        positions, and how many tokens its catch-up held."""
        if self.chosen is not None or mode != self.mode() or positions <= 0:
            return
        self._steps += 1
        if self._steps > self.WARM:
            spent = self._spent[mode, caught_up > 1]
            spent[0] += seconds
            spent[1] += positions
            spent[2] += 1
        enough = self._steps >= self.BLOCK and self._spent[mode, True][2] >= self.TWO_TOKEN_STEPS
        if enough or self._steps >= self.LONGEST:
            self._block, self._steps = self._block + 1, 0
            if self._block == len(self._order):
                self._decide()

    def per_position(self, mode: str) -> float | None:
        """A draft position's seconds this way, on the mix of catch-ups both ways' steps had together;
        None before both ways timed two-token catch-ups, the steps where the ways differ on every
        backend (one-token ones are left out where one way has none)."""
        kinds = [two for two in (False, True) if all(self._spent[m, two][2] for m in self._order)]
        if True not in kinds:
            return None
        positions = {two: sum(self._spent[m, two][1] for m in self._order) for two in kinds}
        total = sum(positions.values())
        return sum(positions[two] / total * self._spent[mode, two][0] / self._spent[mode, two][1] for two in kinds)

    def _decide(self) -> None:
        merged, split = self.per_position(MERGED), self.per_position(SPLIT)
        if merged is None or split is None:  # too few steps of a kind either way: nothing to tell them apart
            self.chosen, self.why = MERGED, "timed: too few steps to tell the ways apart"
            return
        self.chosen = SPLIT if split <= merged * self.MARGIN else MERGED
        self.why = f"timed: a draft position {split * 1e3:.2f} ms split, {merged * 1e3:.2f} ms merged"

    def describe(self) -> str:
        """For bench and --stats: the way in force and why."""
        return f"{self.mode()} ({self.why})"
