"""What a step really costs on this machine, learned from the engine's own steps.

A startup microbenchmark times bare decodes; a step also pays for fetching and checking logits,
verifying, planning and bookkeeping, and on a fast backend (a GPU, Metal) those are most of it:
measured on an H100, a draft token cost 3.6 ms inside the loop against 1.16 ms in llama-bench, and
the curve predicted 1.12-1.25x for modes that ran at 0.57-0.61x. On 16 CPU cores the curve erred
the other way (0.87x predicted, 1.27x measured). So every step the engine runs is timed as it pays
for it and feeds this estimate:

  T(n)  seconds of one step whose target decode holds n rows (plan, decode, logits, verification,
        commit: everything but the drafters' own work), per n;
  d     seconds of one draft-model decode (one draft position, all sequences drafting in lockstep).
  r     seconds of dropping a rejected draft tail (one sequence's commit): nothing on an attention
        model, a state restore and a replay decode on a recurrent one (llama/rollback.py). T(n)
        includes it already, averaged over its steps; `rollback_ratio` shows it on its own.

Each is the median of the last WINDOW samples: robust to outliers (a shared machine's hiccup, a
page fault) and following drift (another process, a laptop throttling) within a window; a row
count's first sample is averaged with the prior. A batch of n rows is timed against the plain steps
of the same moment: each sample is kept as seconds / T(1) of the last few plain steps, and T(n)/T(1)
is the median of those ratios. Medians of seconds taken at different times drift apart on a shared
machine: measured here, plain steps took 117-146 ms within minutes, and a benchmark learnt T(2)/T(1)
= 1.92 from its runs' medians where the two timed side by side cost 1.37-1.49 times one
(bench/measured/vm-20261123-cold-floors.md), so drafting was priced out by the drift.

Going back to plain decoding has a cost of its own: on a backend that replays a recorded graph
only while the batch keeps its shape (llama.cpp's CUDA graphs: the first decode after a change runs
without one, the second records it), the plain steps right after a drafting step run slow. Measured
on an H100 (bench/measured/lent-20261127-verify-shapes.md): a 2-row verify batch among plain steps
took 2.6 plain steps, and the two plain steps after it 1.9 each. Those plain steps are the draft's
cost, not plain decoding's: their excess over T(1) (SWITCH_STEPS of them) is the switch cost, left
out of T(1), and `step_ratio` prices it into a draft that starts a run of drafts (a copy's drafts in
a row pay it once, an isolated draft pays it whole: ~4.4 plain steps for 2 rows there). On a CPU
(no graphs) the excess is noise around 0: below AFTERMATH_MIN it is taken as none. Each sample is
measured against the steady plain step that follows them in the same run of plain steps, not against
T(1): a machine that slowed down since T(1) was timed showed as a switch cost (a 2-core run drafting
every other step priced +0.47 plain steps, bench/measured/xeon-20261127-periodic-emoji.txt), and once
priced, the steps that would have brought T(1) up to date were left out of it.

Row counts never observed are what earlier runs learnt here; else, before any batch was timed,
the more optimistic of the prior (a startup curve) and a generic shape (so a lying prior cannot
stop the drafts that would correct it); else they are interpolated between the observed counts, or
extrapolated past the largest at a prompt row's cost a row (the largest two's slope before a prompt
chunk was timed).
"""

from __future__ import annotations

import statistics
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from specllama.decoding.cost.curve import CostCurve
from specllama.decoding.cost.model import BLOCK_ROWS

WINDOW = 24  # samples kept per row count: enough for a robust median, short enough to follow drift
PRIOR_SAMPLES = 1  # a prior value counts as this many samples until more real ones than that arrive
# Without any prior, T(n)/T(1) is taken as 1 + GENERIC_SLOPE*(n-1): between the memory-bound many-core
# CPU and GPU (0.07-0.2 per row for llama-bench, ~0.35 inside our loop on an H100) and the
# compute-bound 2-core CPU (0.5-0.7). Confident suffix drafts get tried, teaching the real slope.
GENERIC_SLOPE = 0.35
MAX_SLOPE = 1.0  # one more row never costs more than a whole one-row step
# A row count seen only a few times and not for a while forgets those samples: the first decodes of
# a process (page faults) or a moment of contention could otherwise price it out for good, since
# the planner never chooses what looks dear and so never times it again. Measured: a benchmark's
# warm-up left T(2)/T(1) at 1.80 and T(3) at 3.26 (1.52 and ~2.0 in steady steps), and `auto` then
# drafted nothing in 72 runs.
# Each time a count is forgotten it waits twice as long to be forgotten again, and a forgotten
# count is priced on the generic shape, not the prior (which may be what misled in the first place).
FEW_SAMPLES = 4
STALE_STEPS = 64
MIN_SLOPE = 0.02  # nor nothing
RECENT_PLAIN = 8  # plain steps a batch's sample is compared with: the machine's speed at that moment
# Beyond the largest row count timed, a row costs what a prompt's row does, times this (a verified
# row also computes its logits, which a prefill row skips). Not the slope of the largest two counts
# timed: that of T(8)..T(9) (0.7 a row: small batches are dear on 2 cores) priced a 64-token draft at
# T(65)/T(1) ~ 46 against ~25 measured, and a near-certain copy never drafted past a few tokens; and
# one block's dip below the count before it (15 rows 9.9 plain steps, 16 rows 6.9) is a slope below
# nothing, clamped to MIN_SLOPE, which priced 48 rows at 7.5 plain steps where they cost 22.5 (a
# fresh engine's 47-token bet at an edit, lost at its first token: replayed, 0.87x of plain on that
# prompt; bench/measured/vm-20261129-r15-extrapolation).
# It was 1.4, from a 64-row batch's average of 16.7 ms a row against a prefill's 11.4-12.0; but the
# bound is on one more row, and one more verify row costs what a prompt row does: 10.4 ms from 16
# to 64 rows, 11.1 from 4 to 64 (bench/measured/vm-20261125-verify-rows). At 1.4 a fresh engine
# priced 64 rows at ~33 plain steps against 22 and drafted long copies in pieces: replayed from an
# empty cost cache (scripts/measure/policy_replay.py --fresh-costs), the agentic texts ran at
# 1.245x of plain at 1.4 and 1.294x at 1.0, prose within 1 % (vm-20261126-policy-replay-positions).
VERIFY_ROW_FACTOR = 1.0
PREFILL_MIN_ROWS = 32  # shorter prompt chunks say little about a big batch's cost per row
# Plain steps after a drafting step whose time beyond T(1) is the drafting step's (see above): llama.cpp's
# CUDA backend runs the first decode after a shape change without a graph and records one on the second.
SWITCH_STEPS = 2
# ... charged only while their median excess is at least this, in plain steps: on a CPU it is noise around
# 0, and the plain steps after a draft are what keeps T(1) current while a text drafts every other step.
AFTERMATH_MIN = 0.25


# What a draft position of a source other than the draft model is believed to cost before one was
# timed, in plain steps. An MTP head is one decoder layer plus the output head over the target's own
# hidden state: for Qwen3.5-9B about 1/32 of the layers and the 248k-row head (~10 % of the
# weights), for the 27B ~6 %; 0.15 errs on the dear side of those, and the first draft times it.
SOURCE_PRIOR_RATIO = {"mtp": 0.15}


def generic_ratio(n: int) -> float | None:
    return 1.0 + GENERIC_SLOPE * (n - 1) if n >= 1 else None


@dataclass
class Prior:
    """What is believed before this run's steps: a ratio shape, T(1) and the draft decode's cost
    relative to T(1) (None: unknown)."""
    ratio: Callable[[int], float | None] = generic_ratio
    t1_s: float | None = None
    draft_ratio: float | None = None
    learned: bool = False  # from earlier runs' steps (trusted where unobserved), not a bare benchmark
    known: frozenset[int] = frozenset()  # the row counts it holds a measurement of (others are its guesses)
    switch: float | None = None  # the switch cost earlier runs measured here (StepCosts.switch_ratio), in plain steps


@dataclass
class StepCosts:
    prior: Prior = field(default_factory=Prior)
    window: int = WINDOW
    target: dict[int, deque] = field(default_factory=dict)  # rows -> recent step seconds
    # rows (> 1) -> recent samples of seconds / T(1) of the plain steps around them
    relative: dict[int, deque] = field(default_factory=dict)
    last_seen: dict[int, int] = field(default_factory=dict)  # rows -> the step it was last timed at
    forgotten: dict[int, int] = field(default_factory=dict)  # rows -> how often its samples expired
    draft: deque = field(default_factory=lambda: deque(maxlen=WINDOW))  # recent draft-decode seconds
    # Other decoding sources' draft decodes (an MTP head: one layer and the output head of the
    # target, not a second model), by source: each is priced on its own, never on the draft model's.
    drafts_by: dict[str, deque] = field(default_factory=dict)
    prefill: deque = field(default_factory=lambda: deque(maxlen=WINDOW))  # seconds a row of recent prompt chunks
    rollback: deque = field(default_factory=lambda: deque(maxlen=WINDOW))  # (tokens dropped, seconds) per rollback
    steps: int = 0
    last_t1_step: int = -1  # when T(1) was last observed (a plain step): the planner probes when it is stale
    # Plain steps after the last drafting step still to be charged to its aftermath, and the seconds of
    # those charged so far (a sample once the steady plain step after them comes).
    _charge_left: int = field(default=0, repr=False, compare=False)
    _charged: list = field(default_factory=list, repr=False, compare=False)
    _last_rows: int = field(default=1, repr=False, compare=False)  # the last step's rows: is a draft now a run's start?
    # Per drafting step whose aftermath was charged: the excess of the plain steps after it, in plain steps.
    aftermath: deque = field(default_factory=lambda: deque(maxlen=WINDOW))
    # Estimates are read many times a step (every drafter, every candidate length and N) and change
    # only when a sample arrives: kept until then.
    _memo: dict = field(default_factory=dict, repr=False, compare=False)

    # --- learning ----------------------------------------------------------------------------

    def set_prior(self, prior: Prior) -> None:
        """Believe this before the samples (a startup curve measured after loading)."""
        self.prior = prior
        self._memo.clear()

    def record_step(self, rows: int, seconds: float) -> None:
        """A step whose target decode held `rows` rows took `seconds` (drafting excluded)."""
        if rows < 1 or not seconds > 0:
            return
        self._last_rows = rows
        if rows == 1 and self._charge_left:
            self._charge_left -= 1
            if self._charge(seconds):
                return
        elif rows == 1 and self._charged:
            self._aftermath_sample(seconds)
        if rows > 1:
            now = self._t1_now()
            if now:
                self.relative.setdefault(rows, deque(maxlen=self.window)).append(seconds / now)
            self._charge_left, self._charged = SWITCH_STEPS, []  # a run of plain steps cut short: no sample
        self.steps += 1
        self._memo.clear()
        self.target.setdefault(rows, deque(maxlen=self.window)).append(seconds)
        self.last_seen[rows] = self.steps
        if rows == 1:
            self.last_t1_step = self.steps
        for n in [n for n, samples in self.target.items() if n != 1 and len(samples) < FEW_SAMPLES
                  and self.steps - self.last_seen[n] > STALE_STEPS << self.forgotten.get(n, 0)]:
            del self.target[n]  # estimated again as unseen: optimistic, so it is timed again
            self.relative.pop(n, None)
            self.forgotten[n] = self.forgotten.get(n, 0) + 1

    def _charge(self, seconds: float) -> bool:
        """A plain step right after a drafting step: part of that step's aftermath, measured once the
        steady step after it comes (_aftermath_sample). Where the aftermath is real (AFTERMATH_MIN) the
        step is no T(1) sample (True); else a plain sample like any other (False)."""
        self._charged.append(seconds)
        if self.switch_ratio() == 0.0:
            return False
        self.steps += 1
        # It answers the planner's probe all the same (planner.py: a plain step every PROBE_EVERY): probing
        # on until a steady plain step came would cost a long copy two more plain steps each time.
        self.last_t1_step = self.steps
        self._memo.clear()
        return True

    def _aftermath_sample(self, steady: float) -> None:
        """The first plain step past the charged ones: their excess over it, in plain steps, is one
        aftermath sample (the same moment's machine on both sides)."""
        self.aftermath.append(sum(seconds - steady for seconds in self._charged) / steady)
        self._charged = []
        self._memo.pop("switch", None)

    def switch_ratio(self) -> float:
        """What going back to plain decoding after drafting costs, in plain steps: the plain steps right
        after a drafting step beyond T(1) (median over the recent drafting steps), where that is real
        (AFTERMATH_MIN); else 0."""
        if "switch" not in self._memo:
            # Before this run's first draft, what earlier runs here measured: a GPU's first isolated draft
            # is then priced with it, not found dear afterwards.
            median = self.aftermath_median()
            self._memo["switch"] = priced_switch(median if median is not None else self.prior.switch)
        return self._memo["switch"]

    def aftermath_median(self) -> float | None:
        """The plain steps right after a drafting step beyond T(1), in plain steps, as measured (median
        over the recent drafting steps, below AFTERMATH_MIN too): what reports show; None before one."""
        return statistics.median(self.aftermath) if self.aftermath else None

    def step_ratio(self, rows: int) -> float | None:
        """T(rows)/T(1) as a step of that many rows would be paid now, for the policies' decisions: a
        drafting step right after a plain one starts a run of drafts, whose end costs switch_ratio (paid
        once a run: a copy's drafts in a row share it, an isolated draft pays it whole). A method read at
        each call, not a callable chosen once: a draft model's acceptance record keeps it from load on."""
        ratio = self.ratio(rows)
        if rows > 1 and self._last_rows == 1 and ratio is not None:
            return ratio + self.switch_ratio()
        return ratio

    def record_prefill(self, rows: int, seconds: float) -> None:
        """A prompt chunk of `rows` tokens (no logits) took `seconds`: what a row of a big batch
        costs, the slope T(n) is extrapolated at past the largest batch timed. Kept in seconds: a
        first request's prompt is decoded before any plain step has timed T(1)."""
        if rows >= PREFILL_MIN_ROWS and seconds > 0:
            self._memo.clear()
            self.prefill.append(seconds / rows)

    def prefill_row_ratio(self) -> float | None:
        """What one more row of a big verify batch costs, in plain steps; None before a prompt
        chunk of PREFILL_MIN_ROWS or more was timed, or T(1) is known."""
        if "prefill_row" not in self._memo:
            t1 = self.t1()
            self._memo["prefill_row"] = VERIFY_ROW_FACTOR * statistics.median(self.prefill) / t1 if self.prefill and t1 else None
        return self._memo["prefill_row"]

    def record_draft(self, decodes: int, seconds: float, source: str = "model") -> None:
        """The draft model (or another decoding `source`) spent `seconds` on `decodes` decodes
        (draft positions) this step."""
        if decodes >= 1 and seconds > 0:
            self._memo.clear()
            samples = self.draft if source == "model" else self.drafts_by.setdefault(source, deque(maxlen=self.window))
            samples.append(seconds / decodes)

    def record_rollback(self, tokens: int, seconds: float) -> None:
        """Dropping `tokens` rejected drafts from one sequence's cache took `seconds`."""
        if tokens >= 1 and seconds >= 0:
            self.rollback.append((tokens, seconds))

    # --- reading -----------------------------------------------------------------------------

    def samples(self, rows: int) -> int:
        return len(self.target.get(rows, ()))

    def t1(self) -> float | None:
        """Seconds of a plain step: observed, else the prior's, else the cheapest observed step
        scaled back by the prior's shape; None before anything is known."""
        if "t1" not in self._memo:
            self._memo["t1"] = self._t1()
        return self._memo["t1"]

    def _t1(self) -> float | None:
        seen = self._observed(1)
        if seen is not None:
            return seen
        if self.target:
            n = min(self.target)
            base = self.prior.ratio(n) or generic_ratio(n)
            return self._observed(n) / base
        return self.prior.t1_s

    def seconds(self, rows: int) -> float | None:
        """T(rows) in seconds, None before anything is known."""
        t1 = self.t1()
        ratio = self.ratio(rows)
        return None if t1 is None or ratio is None else t1 * ratio

    def ratio(self, rows: int) -> float | None:
        """T(rows)/T(1): the cost of a step of `rows` rows in plain steps. Never None for rows >= 1
        (a planner must be able to price any batch; unknown counts are estimated, see above)."""
        if rows not in self._memo:
            self._memo[rows] = self._ratio(rows)
        return self._memo[rows]

    def _ratio(self, rows: int) -> float | None:
        if rows < 1:
            return None
        if rows == 1:
            return 1.0
        t1 = self.t1()
        prior = self.prior.ratio(rows) or generic_ratio(rows)
        if t1 is None:
            return prior
        estimate = self._unobserved(rows, t1, prior)
        seen = self._observed_ratio(rows, t1)
        if seen is None:
            return estimate
        k = self.samples(rows)
        return seen if k > PRIOR_SAMPLES else (k * seen + PRIOR_SAMPLES * estimate) / (k + PRIOR_SAMPLES)

    def _unobserved(self, rows: int, t1: float, prior: float) -> float:
        """T(rows)/T(1) from everything but that row count's own samples; a whole number of blocks
        never timed here at no more than `_block_untried` says."""
        estimate = self._estimate(rows, t1, prior)
        if rows % BLOCK_ROWS == 0 and not self._timed(rows) and (rows == BLOCK_ROWS or self._timed(rows - BLOCK_ROWS)):
            return min(estimate, self._block_untried(rows))
        return estimate

    def _timed(self, rows: int) -> bool:
        return rows in self.target or rows in self.prior.known

    def _block_untried(self, rows: int) -> float:
        """A block count nobody timed, the block below it timed, priced as if every row past the
        first cost what a prompt row does: cheap enough that the first confident draft that long is
        sent and times it, one block further than what is known, so a try risks one block. Why: the
        blocks are where long drafts are cheapest (cost/model.BLOCK_ROWS), and a fresh engine that
        had timed 11 and 20 rows (the replay simulator's) priced 16 on the line between them (10.8
        plain steps against 7.7) and never sent the 15-token drafts that would have shown it; a
        fresh serve on the agentic replay never timed 16 rows either. Replayed from an empty cost
        cache on recorded answers, with the costs timed at every row count, auto went from 1.262x to
        1.299x of plain on the agentic texts with this alone, 1.309x with whole_blocks too (1.253x,
        1.306x, 1.348x on held-out edit sessions; bench/measured/vm-20261126-policy-replay-blocks16.md)."""
        row = self.prefill_row_ratio()
        return 1.0 + (row if row is not None else GENERIC_SLOPE) * (rows - 1)

    def _estimate(self, rows: int, t1: float, prior: float) -> float:
        if self.prior.learned:
            return prior  # what earlier runs' steps cost here
        if len(self.target) - (1 in self.target) - (rows in self.target and rows > 1) <= 0:
            # No other batch timed yet: the more optimistic of the prior and the generic shape, so
            # a startup curve claiming batches are dear (measured on a busy machine, or a bare
            # benchmark) cannot stop every draft, and so every chance to learn better. Once
            # batches were timed and forgotten, the generic shape alone.
            return generic_ratio(rows) if self.forgotten else min(prior, generic_ratio(rows))
        return self._between_observed(rows, t1)

    def draft_ratio(self, source: str = "model") -> float | None:
        """c: one draft decode in plain steps; None when neither observed nor believed."""
        t1 = self.t1()
        samples = self.draft if source == "model" else self.drafts_by.get(source)
        if samples and t1:
            return statistics.median(samples) / t1
        return self.prior.draft_ratio if source == "model" else SOURCE_PRIOR_RATIO.get(source)

    def rollback_ratio(self) -> float | None:
        """A rollback of a rejected tail in plain steps (median of the recent ones); None before
        one was timed or T(1) is known."""
        t1 = self.t1()
        if not self.rollback or not t1:
            return None
        return statistics.median(seconds for _, seconds in self.rollback) / t1

    def rollback_seconds_per_token(self) -> float | None:
        """Median seconds per dropped token over the recent rollbacks (None before one)."""
        if not self.rollback:
            return None
        return statistics.median(seconds / tokens for tokens, seconds in self.rollback)

    def observed_rows(self) -> list[int]:
        return sorted(self.target)

    def as_curve(self, max_n: int) -> CostCurve | None:
        """These costs in the startup curve's form (T(1), T(n)/T(1) for n = 1..max_n, c), for the
        reports that print a curve; None before T(1) is known."""
        t1 = self.t1()
        if t1 is None:
            return None
        return CostCurve(t1_s=t1, ratios=[self.ratio(n) for n in range(1, max_n + 1)], draft_ratio=self.draft_ratio(),
                         n_past=0, reps=self.steps)

    # --- internals ---------------------------------------------------------------------------

    def _observed(self, rows: int) -> float | None:
        samples = self.target.get(rows)
        return statistics.median(samples) if samples else None

    def _observed_ratio(self, rows: int, t1: float) -> float | None:
        """T(rows)/T(1) from that row count's own samples: each against the plain steps of its
        moment; against today's T(1) only when it was timed before any T(1) was known."""
        relative = self.relative.get(rows)
        if relative:
            return statistics.median(relative)
        seen = self._observed(rows)
        return None if seen is None else seen / t1

    def _t1_now(self) -> float | None:
        """The machine's plain step now: the median of the last few plain steps (else the estimate)."""
        plain = self.target.get(1)
        if plain:
            return statistics.median(list(plain)[-RECENT_PLAIN:])
        return self.t1()

    def _between_observed(self, rows: int, t1: float) -> float:
        """Interpolate between the observed row counts around `rows`; beyond the largest, go on at
        a prompt row's cost a row, or before one is known with the slope of the largest two
        (clamped), or the generic one."""
        # Every row count's own ratio, T(1)'s included, found once for all the `rows` priced until the
        # next sample (a 64-token copy prices 64 lengths a step; rebuilding this per length was ~40 %
        # of asking the suffix drafter on the agentic texts: bench/measured/vm-20261126-asking-cost).
        if "points" not in self._memo:
            observed = sorted((n, self._observed_ratio(n, t1)) for n in self.target if n != 1)
            self._memo["points"] = [(0, 1.0 - GENERIC_SLOPE), (1, 1.0)] + observed
            self._memo["rows"] = [n for n, _ in self._memo["points"]]
        points, ns = self._memo["points"], self._memo["rows"]
        i = bisect_left(ns, rows)  # points[:i] lie below `rows`; points[i] is `rows` itself or above
        j = i + 1 if i < len(ns) and ns[i] == rows else i  # its own samples left out
        if j < len(points):  # `rows` lies between two observed counts (T(1) included): the line between
            (n0, r0), (n1, r1) = points[i - 1], points[j]
            return r0 + (r1 - r0) * (rows - n0) / (n1 - n0)
        # Beyond the largest: a prompt row's cost a row (VERIFY_ROW_FACTOR says why); before a prompt
        # chunk was timed, the slope of the largest two points, where the virtual point at 0 rows
        # gives the generic slope when T(1) is the only one.
        (na, ra), (n0, r0) = points[:i][-2:]
        row = self.prefill_row_ratio()
        if row is not None:
            return r0 + row * (rows - n0)
        return r0 + min(MAX_SLOPE, max(MIN_SLOPE, (r0 - ra) / (n0 - na))) * (rows - n0)

    # --- persistence -------------------------------------------------------------------------

    def snapshot(self) -> dict | None:
        """What a later run on the same machine, models and threads should start from: T(1) and
        the ratios of the observed row counts, the draft ratio. None before T(1) is known."""
        t1 = self.t1()
        if t1 is None or 1 not in self.target:
            return None
        ratios = {str(n): self.ratio(n) for n in self.observed_rows()}
        return {"t1_s": t1, "ratios": ratios, "draft_ratio": self.draft_ratio(), "switch_ratio": self.aftermath_median()}


def priced_switch(aftermath: float | None) -> float:
    """The switch cost a measured aftermath (plain steps, median) stands for: itself where it is real
    (AFTERMATH_MIN), else 0: the one rule the policies (switch_ratio) and the reports go by."""
    return aftermath if aftermath is not None and aftermath >= AFTERMATH_MIN else 0.0


def switch_verdict(aftermath: float | None) -> str:
    """How the reports (bench's, --stats) say what priced_switch makes of a measured aftermath."""
    return "priced into a draft that starts a run" if priced_switch(aftermath) else "taken as none"


def between(points: list[tuple[int, float]], n: int) -> float | None:
    """T(n)/T(1) from sorted (rows, ratio) points: a point's own value, or the straight line between
    the two around n; None outside them (each caller extrapolates in its own way)."""
    below = [p for p in points if p[0] <= n]
    above = [p for p in points if p[0] >= n]
    if not below or not above:
        return None
    (n0, r0), (n1, r1) = below[-1], above[0]
    return r0 if n1 == n0 else r0 + (r1 - r0) * (n - n0) / (n1 - n0)


def prior_from_snapshot(raw: dict, fallback: Prior | None = None) -> Prior:
    """A Prior from what StepCosts.snapshot wrote (validated by the cache before this)."""
    points = sorted((int(n), float(r)) for n, r in raw["ratios"].items())
    base = fallback.ratio if fallback else generic_ratio

    def ratio(n: int) -> float | None:
        if n < 1:
            return None
        inside = between(points, n)
        if inside is not None:
            return inside
        if points and n > points[-1][0]:  # beyond what was learnt: the fallback's growth from there
            n0, r0 = points[-1]
            grow = (base(n) or generic_ratio(n)) - (base(n0) or generic_ratio(n0))
            return r0 + max(grow, MIN_SLOPE * (n - n0))
        return base(n)

    draft, switch = raw.get("draft_ratio"), raw.get("switch_ratio")
    known = frozenset(n for n, _ in points) | (fallback.known if fallback else frozenset())
    return Prior(ratio, float(raw["t1_s"]), None if draft is None else float(draft), learned=True, known=known,
                 switch=None if switch is None else float(switch))
