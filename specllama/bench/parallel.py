"""`specllama bench --parallel 1,4,auto`: a batch job's throughput with N prompts per decode.

Every round runs the whole prompt set once per N (in the order given, N = 1 included as the
baseline), through the same scheduler a `batch` uses, caches cleared between runs; rounds
interleave the N values so a slow moment of a shared machine lands on all of them alike. Reported
per N: the job's tokens/s (prefills included: what a batch user waits for), the median of each
round's ratio to N = 1, and two checks of the cost model: the steady-state prediction
N / (T(N)/T(1)) and, from the steps actually run, the decode time the measured curve predicts
against the decode time measured.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from specllama.decoding.cost.model import Ratio
from specllama.decoding.cost.online import StepCosts
from specllama.decoding.engine import DoneEvent, FailedEvent, GenerationConfig, Request, StepEvent
from specllama.runtime.session import Session


@dataclass
class ParallelRun:
    parallel: int
    round: int
    prompts: int
    tokens: int
    seconds: float  # the whole job, prefills included
    prefill_seconds: float  # sum of the prompts' prefills (each its own decode, so not overlapped)
    predicted_decode_seconds: float | None  # the curve's T(n) summed over the steps run
    failed: int
    latency_median_s: float  # from the job's start to a prompt's last token, median over prompts
    latency_max_s: float

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def decode_seconds(self) -> float:
        return self.seconds - self.prefill_seconds


@dataclass
class ParallelSummary:
    parallel: int
    label: str  # "4" or "auto (4)"
    median_tokens_per_s: float
    median_ratio: float | None  # to N = 1, round by round
    predicted_ratio: float | None  # N / (T(N)/T(1)), the steady state
    decode_vs_predicted: float | None  # measured decode time / the curve's prediction for the steps run
    latency_median_s: float  # a prompt's wait from the job's start, median over prompts and runs
    runs: int


def run_once(runtime: Session, prompts: Sequence[list[int]], config: GenerationConfig, parallel: int,
             costs: StepCosts | None, round_no: int) -> ParallelRun:
    runtime.reset()  # no run inherits another's caches (prefix reuse would flatter the later ones)
    requests = [Request(p, config, tag=i) for i, p in enumerate(prompts)]
    tokens = failed = 0
    prefill = predicted = 0.0
    latencies: list[float] = []
    start = time.perf_counter()
    for _, event in runtime.run_many(requests, parallel):
        if isinstance(event, StepEvent) and costs is not None:
            # Each sequence's step event carries the step's whole batch: charge it its rows' share.
            step = costs.seconds(event.batch_tokens)
            predicted = None if step is None or predicted is None else (
                predicted + step * (event.drafted + 1) / event.batch_tokens)
        elif isinstance(event, DoneEvent):
            tokens += event.summary.tokens
            prefill += event.summary.t_prompt
            latencies.append(time.perf_counter() - start)
        elif isinstance(event, FailedEvent):
            failed += 1
    seconds = time.perf_counter() - start
    return ParallelRun(parallel, round_no, len(prompts), tokens, seconds, prefill,
                       predicted if costs is not None else None, failed,
                       statistics.median(latencies) if latencies else 0.0, max(latencies, default=0.0))


def run_parallel_bench(runtime: Session, prompts: Sequence[list[int]], config: GenerationConfig,
                       levels: Sequence[int], rounds: int,
                       progress: Callable[[int, int, str], None] | None = None) -> list[ParallelRun]:
    costs = runtime.costs
    runs: list[ParallelRun] = []
    total = rounds * len(levels)
    # A short warm-up: the first decodes of a process are slow (page faults, clocks).
    run_once(runtime, prompts[:1], GenerationConfig(max_tokens=8, drafter="none", k=0), 1, None, -1)
    for r in range(rounds):
        for n in levels:
            if progress:
                progress(len(runs), total, f"round {r + 1}/{rounds}: {n} at once")
            runs.append(run_once(runtime, prompts, config, n, costs, r))
    if progress:
        progress(total, total, "done")
    return runs


def summarize(runs: Sequence[ParallelRun], ratio: Ratio | None, labels: dict[int, str]) -> list[ParallelSummary]:
    by_round_base = {r.round: r.tokens_per_s for r in runs if r.parallel == 1}
    out = []
    for n in dict.fromkeys(r.parallel for r in runs):
        mine = [r for r in runs if r.parallel == n]
        ratios = [r.tokens_per_s / by_round_base[r.round] for r in mine if by_round_base.get(r.round)]
        checks = [r.decode_seconds / r.predicted_decode_seconds for r in mine if r.predicted_decode_seconds]
        ratio_n = ratio(n) if ratio else None
        out.append(ParallelSummary(n, labels.get(n, str(n)), statistics.median(r.tokens_per_s for r in mine),
                                   statistics.median(ratios) if ratios else None,
                                   n / ratio_n if ratio_n else None,
                                   statistics.median(checks) if checks else None,
                                   statistics.median(r.latency_median_s for r in mine), len(mine)))
    return out
