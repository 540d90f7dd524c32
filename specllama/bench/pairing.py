"""Benchmark runs against plain decoding, token by token: greedy runs, and sampled runs with a seed.

The comparison itself (first divergence, near-tie by the target's top-2 logit gap) is
specllama/decoding/exactness.py; this module pairs each run with the `none` run of its prompt and
gives every verdict other than "identical" its evidence: where the outputs part, the target's
top-2 gap there (or why there is none), and both texts from that point.

Sampled with a seed, each position draws from its own stream (decoding/position_streams.py), so a
run's text is plain decoding's wherever the rows agree; where the batch's rounding moved a row, the
draw there may land on another token and the texts part ("parted": expected, not a fault; `--exact`
keeps the rows, and the texts, the same).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from specllama.bench.runner import RunRecord
from specllama.decoding.exactness import NEAR_TIE_LOGITS, Comparison, first_divergence
from specllama.runtime.session import Session

__all__ = ["NEAR_TIE_LOGITS", "Comparison", "Divergence", "SampledComparison", "judge_runs", "judge_sampled",
           "comparison_dict"]

# Tokens of text shown on each side of a divergence.
CONTEXT_TOKENS = 12


@dataclass(frozen=True)
class Divergence(Comparison):
    """A comparison that is not "identical", with what a reader needs to judge it."""
    why_no_gap: str | None = None  # set when the gap could not be measured, saying why
    common_text: str = ""  # the last tokens both runs share before they part
    reference_text: str = ""  # plain decoding's text from the divergence on
    candidate_text: str = ""  # this run's text from the divergence on


@dataclass(frozen=True)
class SampledComparison(Comparison):
    """A sampled run against plain decoding's with the same seed: the same text, or where it parted."""

    @property
    def verdict(self) -> str:
        return "identical" if self.identical else "parted"


def judge_sampled(runs: Sequence[RunRecord]) -> list[SampledComparison | None]:
    """One comparison per run (aligned with `runs`): its tokens against the first `none` run of its
    prompt; None where there is no baseline. Nothing is decoded: a sampled divergence has no top-2 gap."""
    reference = _baselines(runs)
    out: list[SampledComparison | None] = []
    for run in runs:
        ref = reference.get(str(run.prompt_id))
        at = None if ref is None else first_divergence(ref.token_ids, run.token_ids)
        out.append(None if ref is None else SampledComparison(at is None, at))
    return out


def _baselines(runs: Sequence[RunRecord]) -> dict[str, RunRecord]:
    reference: dict[str, RunRecord] = {}
    for run in runs:
        key = str(run.prompt_id)
        if run.config.is_baseline and key not in reference:
            reference[key] = run
    return reference


def judge_runs(session: Session, prompts: dict[str, Sequence[int]], runs: Sequence[RunRecord]) -> list[Comparison | None]:
    """One comparison per run (aligned with `runs`): each run against the first `none` run of its
    prompt (the session's judge: a fresh plain decode where they part). None where there is no
    baseline. Clears the target's cache."""
    reference = _baselines(runs)
    out: list[Comparison | None] = []
    for run in runs:
        key = str(run.prompt_id)
        ref = reference.get(key)
        if ref is None:
            out.append(None)
            continue
        comparison = session.judge(prompts[key], ref.token_ids, run.token_ids)
        out.append(comparison if comparison.identical else _with_evidence(session, prompts[key], ref, run, comparison))
    return out


def _with_evidence(session: Session, prompt: Sequence[int], ref: RunRecord, run: RunRecord,
                   c: Comparison) -> Divergence:
    at = c.position
    gap, near_tie, why = c.gap, c.near_tie, None
    if gap is None:  # one run ended where the other went on: compare_greedy measures no gap there
        shorter = ref if len(ref.token_ids) < len(run.token_ids) else run
        finish = shorter.summary.finish_reason
        if finish == "stop":
            # It chose end-of-generation where the other chose a token: a divergence like any other,
            # and the target's top-2 gap after the common prefix says whether it was a near-tie.
            gap = session.top2_gap(list(prompt) + list(ref.token_ids[:at]))
            near_tie = gap < NEAR_TIE_LOGITS
        else:
            who = "plain decoding" if shorter is ref else shorter.config.label
            why = (f"{who} stopped after {at} tokens ({finish}) while the other went on: not a choice between "
                   "two tokens, so there is no top-2 gap to judge")
    text = session.detokenize
    return Divergence(False, at, gap, near_tie, why_no_gap=why,
                      common_text=text(ref.token_ids[max(0, at - CONTEXT_TOKENS):at]),
                      reference_text=text(ref.token_ids[at:at + CONTEXT_TOKENS]),
                      candidate_text=text(run.token_ids[at:at + CONTEXT_TOKENS]))


def comparison_dict(c: Comparison) -> dict:
    entry = {"status": c.verdict, "position": c.position, "gap": c.gap}
    if isinstance(c, Divergence):
        entry.update({"why_no_gap": c.why_no_gap, "common_text": c.common_text,
                      "none_text": c.reference_text, "text": c.candidate_text})
    return entry


def explain(config: str, prompt_id: object, divergence: dict) -> str:
    """One line for a run that is not identical to plain decoding, with its evidence."""
    where = f"{config} on prompt {prompt_id!r} parts from plain decoding at token {divergence['position']}"
    if divergence.get("gap") is not None:
        judged = f"top-2 gap {divergence['gap']:.3f} logits ({'within' if divergence['status'] == 'near_tie' else 'above'} " \
                 f"the {NEAR_TIE_LOGITS} near-tie tolerance)"
    else:
        judged = divergence.get("why_no_gap") or "no gap measured"
    if "common_text" not in divergence:
        return f"{where}: {judged}"
    return (f"{where}: {judged}; after {divergence['common_text']!r}, none: {divergence['none_text']!r}, "
            f"{config}: {divergence['text']!r}")
