"""Speed over the text a run shares with plain decoding: each run's time to write the tokens it has in
common with plain decoding's text, against plain decoding's time to write the same tokens.

Why: a prompt's tok/s ratio compares two texts when a run parted from plain decoding's (sampled with a
seed, where the batch's rounding moved a row: decoding/position_streams.py; greedy, at a near-tie).
The part after the parting may copy more or less, run longer or stop sooner, so the ratio then mixes
drafting's speed with the luck of which text was drawn: on the blind set at 0.7 (bench/measured/
vm-20261128-r12-position-streams) the worst prompt, 0.94x, compared 61 tokens of one text with 70 of
another. Over the common prefix both runs wrote the same tokens, so their times compare drafting alone.

A run's time to its m-th token is the sum of its steps' own seconds through the step that emitted it
(StepEvent's draft + verify + python, as own_steps.py counts them), in both arms alike: a drafting step
that wrote the m-th token and more is charged whole, which leans against the drafting run. Runs that
part before MIN_SHARED_TOKENS are left out (a few tokens' time is mostly the first steps' noise).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Sequence

from specllama.bench.runner import RunRecord
from specllama.decoding.exactness import first_divergence

MIN_SHARED_TOKENS = 16


@dataclass(frozen=True)
class SharedSpeed:
    """One run's speed over the text it shares with plain decoding's."""
    tokens: int  # the common prefix's length (the whole text where the run is plain's)
    whole: bool  # the run's whole text is plain decoding's
    ratio: float | None  # plain decoding's time for those tokens (median over its runs) / this run's; None: left out


def shared_speeds(runs: Sequence[RunRecord]) -> list[SharedSpeed | None]:
    """One entry per run (aligned with `runs`): None for plain decoding's own runs and where the prompt
    has none; else the run's speed over the tokens it shares with the prompt's first plain run."""
    plain: dict[str, list[RunRecord]] = {}
    for run in runs:
        if run.config.is_baseline:
            plain.setdefault(str(run.prompt_id), []).append(run)
    out: list[SharedSpeed | None] = []
    for run in runs:
        references = plain.get(str(run.prompt_id))
        if run.config.is_baseline or not references:
            out.append(None)
            continue
        reference = references[0].token_ids
        parted = first_divergence(reference, run.token_ids)
        m = min(len(reference) if parted is None else parted, len(run.token_seconds))
        whole = m == len(run.token_ids) == len(reference)
        # Every plain run that wrote those m tokens (with a seed, all of them: plain decoding's text repeats).
        times = [p.token_seconds[m - 1] for p in references
                 if m and len(p.token_seconds) >= m and p.token_ids[:m] == run.token_ids[:m]]
        own = run.token_seconds[m - 1] if m else 0.0
        ratio = statistics.median(times) / own if m >= MIN_SHARED_TOKENS and times and own > 0 else None
        out.append(SharedSpeed(m, whole, ratio))
    return out
