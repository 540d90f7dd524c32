"""Greedy benchmark runs against plain decoding, token by token.

The comparison itself (first divergence, near-tie by the target's top-2 logit gap) is
specllama/exactness.py; this module only pairs each run with the `none` run of its prompt.
"""

from __future__ import annotations

from typing import Sequence

from specllama.bench.runner import RunRecord
from specllama.decoding.exactness import NEAR_TIE_LOGITS, Comparison, compare_greedy
from specllama.llama.context import DecodeContext

__all__ = ["NEAR_TIE_LOGITS", "Comparison", "judge_runs", "comparison_dict"]


def judge_runs(target: DecodeContext, prompts: dict[str, Sequence[int]],
               runs: Sequence[RunRecord]) -> list[Comparison | None]:
    """One comparison per run (aligned with `runs`): each run against the first `none` run of its
    prompt. None where there is no baseline. Clears the target's cache."""
    reference: dict[str, Sequence[int]] = {}
    for run in runs:
        key = str(run.prompt_id)
        if run.config.is_baseline and key not in reference:
            reference[key] = run.token_ids
    out: list[Comparison | None] = []
    for run in runs:
        key = str(run.prompt_id)
        ref = reference.get(key)
        out.append(None if ref is None else compare_greedy(target, prompts[key], ref, run.token_ids))
    return out


def comparison_dict(c: Comparison) -> dict:
    return {"status": c.verdict, "position": c.position, "gap": c.gap}
