"""From individual runs to the numbers a reader compares.

Speedup is a per-prompt ratio (median tokens/s of the configuration over median tokens/s of `none`
on the same prompt) and then the geometric mean over prompts: prompts differ in speed by more than
configurations do, so pooling raw tokens/s would let the fast prompts decide. Acceptance, mean
accepted length and per-position acceptance are pooled over every step of every run, as vLLM does.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from specllama.bench.configs import BenchConfig
from specllama.bench.pairing import Comparison, comparison_dict
from specllama.bench.runner import RunRecord
from specllama.bench.shared_text import SharedSpeed
from specllama.decoding.cost.curve import CostCurve
from specllama.decoding.cost.model import predicted_speedup, step_cost
from specllama.decoding.engine import Summary
from specllama.decoding.verifiers import VERIFIERS

# "parted": a sampled run's text left plain decoding's where the batch's rounding moved a row (pairing.py).
_SEVERITY = {"identical": 0, "parted": 1, "near_tie": 1, "different": 2}


@dataclass
class PromptResult:
    config: str
    prompt_id: str | int
    tokens: int
    tokens_per_s: float  # median over repeats
    runs_tokens_per_s: list[float]
    speedup: float | None
    acceptance: float | None
    mean_accepted: float
    identical: str | None  # identical | near_tie | parted | different (worst over repeats); None: not checked
    divergence: dict | None
    finish_reason: str
    drafted_by: dict = field(default_factory=dict)  # per source (suffix, model): drafts verified, all repeats
    accepted_by: dict = field(default_factory=dict)  # ... and accepted
    # drafting's own net on this prompt, median over repeats: each run's drafting priced on its own
    # plain steps (own_steps.py), free of the machine's drift between runs; None for `none`
    drafting_net: float | None = None
    # over the text each run shares with plain decoding's (shared_text.py): the median over repeats of
    # plain's time for those tokens / the run's, and the shared tokens' median; None for `none`, and where
    # every run parted too early to time
    shared_speedup: float | None = None
    shared_tokens: int | None = None


@dataclass
class ConfigSummary:
    config: str
    drafter: str
    k: int
    verify: str
    runs: int = 0
    tokens_per_s: float | None = None  # median over all runs
    geomean_speedup: float | None = None
    min_speedup: float | None = None
    max_speedup: float | None = None
    acceptance: float | None = None
    mean_accepted: float | None = None
    per_position: list[float] = field(default_factory=list)
    time_split: dict = field(default_factory=dict)  # draft / verify / python: seconds and share
    predicted_speedup: float | None = None  # cost model at the measured acceptance, K drafts every step
    predicted_from_steps: float | None = None  # cost model over the steps as they happened (see below)
    identical: dict | None = None  # counts of identical / parted / near_tie / different runs; None: sampled without a seed
    peak_rss_bytes: int | None = None
    drafted_by: dict = field(default_factory=dict)  # per source (suffix, model): drafts verified, all runs
    accepted_by: dict = field(default_factory=dict)  # ... and accepted
    # drafting's own net per prompt (PromptResult.drafting_net): the worst prompt's, which, and the median
    min_drafting_net: float | None = None
    min_drafting_net_prompt: str | None = None
    median_drafting_net: float | None = None
    # over the text each run shares with plain decoding's (PromptResult.shared_speedup): the geometric mean
    # over prompts, the worst prompt's and which; runs timed over their whole text, up to where they parted,
    # and left out (parted before shared_text.MIN_SHARED_TOKENS)
    shared_geomean: float | None = None
    shared_min: float | None = None
    shared_min_prompt: str | None = None
    shared_runs: dict | None = None
    failed: str | None = None


def pooled(summaries: list[Summary]) -> Summary:
    """One Summary holding the step statistics of many, so its properties give pooled rates."""
    total = Summary()
    for s in summaries:
        total.add(s)
    return total


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def prompt_results(runs: list[RunRecord], verdicts: list[Comparison | None],
                   shared: list[SharedSpeed | None]) -> list[PromptResult]:
    groups: dict[tuple[str, str], list[tuple[RunRecord, Comparison | None]]] = {}
    timed: dict[tuple[str, str], list[SharedSpeed]] = {}
    for run, verdict, speed in zip(runs, verdicts, shared):
        groups.setdefault((run.config.label, str(run.prompt_id)), []).append((run, verdict))
        if speed is not None and speed.ratio is not None:
            timed.setdefault((run.config.label, str(run.prompt_id)), []).append(speed)
    baseline_tps = {pid: statistics.median(r.summary.tokens_per_s for r, _ in group)
                    for (label, pid), group in groups.items() if label == "none"}
    results = []
    for (label, pid), group in groups.items():
        tps = [r.summary.tokens_per_s for r, _ in group]
        median_tps = statistics.median(tps)
        base = baseline_tps.get(pid)
        stats = pooled([r.summary for r, _ in group])
        judged = [v for _, v in group if v is not None]
        worst = max(judged, key=lambda v: _SEVERITY[v.verdict]) if judged else None
        nets = [r.drafting_net for r, _ in group if r.drafting_net is not None]
        speeds = timed.get((label, pid), [])
        results.append(PromptResult(
            config=label, prompt_id=group[0][0].prompt_id, tokens=group[0][0].summary.tokens,
            tokens_per_s=median_tps, runs_tokens_per_s=tps,
            speedup=median_tps / base if base else None,
            acceptance=stats.acceptance, mean_accepted=stats.mean_accepted,
            identical=worst.verdict if worst else None,
            divergence=comparison_dict(worst) if worst and not worst.identical else None,
            finish_reason=group[0][0].summary.finish_reason,
            drafted_by=dict(stats.drafted_by), accepted_by=dict(stats.accepted_by),
            drafting_net=statistics.median(nets) if nets else None,
            shared_speedup=statistics.median(s.ratio for s in speeds) if speeds else None,
            shared_tokens=round(statistics.median(s.tokens for s in speeds)) if speeds else None))
    return results


def config_summaries(configs: list[BenchConfig], runs: list[RunRecord], verdicts: list[Comparison | None],
                     results: list[PromptResult], curve: CostCurve | None, failed: dict[str, str],
                     shared: list[SharedSpeed | None]) -> list[ConfigSummary]:
    out = []
    for config in configs:
        summary = ConfigSummary(config.label, config.drafter, config.k, config.verify, failed=failed.get(config.label))
        mine = [(r, v) for r, v in zip(runs, verdicts) if r.config.label == config.label]
        if mine:
            _fill(summary, config, mine, [p for p in results if p.config == config.label], curve)
            _fill_shared(summary, [p for p in results if p.config == config.label],
                         [s for r, s in zip(runs, shared) if r.config.label == config.label and s is not None])
        out.append(summary)
    return out


def _fill_shared(summary: ConfigSummary, results: list[PromptResult], speeds: list[SharedSpeed]) -> None:
    if not speeds:
        return
    timed = [p for p in results if p.shared_speedup is not None]
    summary.shared_runs = {"whole": sum(s.whole and s.ratio is not None for s in speeds),
                           "prefix": sum(not s.whole and s.ratio is not None for s in speeds),
                           "left_out": sum(s.ratio is None for s in speeds)}
    if timed:
        worst = min(timed, key=lambda p: p.shared_speedup)
        summary.shared_geomean = geomean([p.shared_speedup for p in timed])
        summary.shared_min, summary.shared_min_prompt = worst.shared_speedup, str(worst.prompt_id)


def _fill(summary: ConfigSummary, config: BenchConfig, mine: list[tuple[RunRecord, Comparison | None]],
          results: list[PromptResult], curve: CostCurve | None) -> None:
    stats = pooled([r.summary for r, _ in mine])
    speedups = [p.speedup for p in results if p.speedup is not None]
    summary.runs = len(mine)
    summary.tokens_per_s = statistics.median(r.summary.tokens_per_s for r, _ in mine)
    summary.geomean_speedup = geomean(speedups)
    summary.min_speedup = min(speedups, default=None)
    summary.max_speedup = max(speedups, default=None)
    nets = [p for p in results if p.drafting_net is not None]
    if nets:
        worst = min(nets, key=lambda p: p.drafting_net)
        summary.min_drafting_net, summary.min_drafting_net_prompt = worst.drafting_net, str(worst.prompt_id)
        summary.median_drafting_net = statistics.median(p.drafting_net for p in nets)
    summary.acceptance = stats.acceptance
    summary.drafted_by, summary.accepted_by = dict(stats.drafted_by), dict(stats.accepted_by)
    summary.mean_accepted = stats.mean_accepted
    summary.per_position = stats.per_position
    spent = stats.t_draft + stats.t_verify + stats.t_python
    summary.time_split = {part: {"seconds": round(t, 4), "share": t / spent if spent else None}
                          for part, t in (("draft", stats.t_draft), ("verify", stats.t_verify),
                                          ("python", stats.t_python))}
    judged = [v for _, v in mine if v is not None]
    if judged:
        summary.identical = {s: sum(v.verdict == s for v in judged) for s in _SEVERITY}
    rss = [r.rss_bytes for r, _ in mine if r.rss_bytes]
    summary.peak_rss_bytes = max(rss) if rss else None
    if curve is not None:
        # A suffix draft costs next to nothing; under auto only the model's share of the drafts
        # costs c (per drafted token, spread over all drafts: the steps' mix is not recorded).
        draft_ratio = None
        if config.drafter == "suffix":
            draft_ratio = 0.0
        elif config.drafter == "auto":
            share = stats.drafted_by.get("model", 0) / stats.drafted if stats.drafted else 0.0
            draft_ratio = share * curve.draft_ratio if share and curve.draft_ratio is not None else 0.0
        alpha = stats.acceptance if not config.is_baseline else 0.0
        # Stairs decode (K+1)(K+2)/2 tokens per step; timed as one causal batch of that size, an
        # approximation (their attention spans differ), so read that prediction as a rough one.
        k = config.generation().fixed_k
        if k is not None:  # under k=auto only the per-step prediction below applies
            verify_tokens = VERIFIERS[config.verify].batch_tokens(k)
            c = curve.draft_ratio if draft_ratio is None else draft_ratio
            summary.predicted_speedup = predicted_speedup(curve.ratio, k, alpha, c, verify_tokens)
        summary.predicted_from_steps = _speedup_from_steps(curve, stats, draft_ratio, config.verify)


def _speedup_from_steps(curve: CostCurve, stats: Summary, draft_ratio: float | None, verify: str) -> float | None:
    """Tokens gained per step as measured, over each step's modelled cost given how many drafts it
    actually had. Prompt lookup often proposes fewer than K drafts or none, and p_min cuts drafts
    short, which the K-every-step formula cannot see; the gap between this and the measured speedup
    is what the cost curve misses (Python time, cache effects)."""
    c = curve.draft_ratio if draft_ratio is None else draft_ratio
    if not stats.steps or c is None:
        return None
    # drafted_at[i] counts the steps with more than i drafts, so steps with exactly j drafts are
    # drafted_at[j-1] - drafted_at[j] (and steps - drafted_at[0] for j = 0).
    at_least = [stats.steps] + stats.drafted_at + [0]
    cost = 0.0
    for j in range(len(at_least) - 1):
        n_steps = at_least[j] - at_least[j + 1]
        if not n_steps:
            continue
        one = step_cost(curve.ratio, j, c, VERIFIERS[verify].batch_tokens(j))
        if one is None:
            return None
        cost += n_steps * one
    return stats.mean_accepted * stats.steps / cost if cost else None
