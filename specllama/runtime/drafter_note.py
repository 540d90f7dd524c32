"""A drafter the user asked for that is not paying says so, with what it measured.

`--drafter model` loads a draft model (`--drafter mtp` the target's own MTP head); the planner may
then judge that its drafts cannot pay on this machine and draft nothing, or its drafts may be
accepted too rarely. Silently, that reads as
"speculation is broken". The note names what was measured: the draft's cost per token in target
steps, the acceptance it needs to break even at its best draft length, and the acceptance it got.
"""

from __future__ import annotations

from specllama.decoding.acceptance import PositionAcceptance
from specllama.decoding.cost.model import break_even_acceptance
from specllama.decoding.cost.online import StepCosts
from specllama.decoding.events import Summary
from specllama.decoding.request import K_AUTO_MAX
from specllama.runtime.notices import Notice
from specllama.runtime.stats import vs_plain

MIN_STEPS = 8  # a shorter answer says too little to judge a drafter by
RARELY = 0.1  # drafts in fewer than this share of steps: the planner judged the drafter could not pay


def needed_acceptance(costs: StepCosts, c: float) -> float | None:
    """The lowest per-position acceptance at which some draft length breaks even; None: none does."""
    needs = [a for k in range(1, K_AUTO_MAX + 1) if (a := break_even_acceptance(costs.ratio, k, c)) is not None]
    return min(needs, default=None)


# The drafters that cost a decode, as the note names them, and what auto does where they do not pay.
NAMES = {"model": "the draft model", "mtp": "the MTP head"}
AUTO_DOES = {"model": "--drafter auto (the default) drafts from the text itself where the draft model does not pay",
             "mtp": "--drafter auto (the default) drafts with the MTP head only where it pays, feeds it only then, "
                    "and leaves it unloaded where its learnt cost says it cannot pay"}


def drafter_note(summary: Summary, costs: StepCosts, record: PositionAcceptance | None,
                 has_model: bool, mtp_record: PositionAcceptance | None = None, has_mtp: bool = False) -> Notice | None:
    source = summary.drafter
    if source not in NAMES or not (has_model if source == "model" else has_mtp) or summary.steps < MIN_STEPS:
        return None
    if source == "mtp":  # its cost as timed here; before that a belief (cost/online.py), not a measurement
        record = mtp_record
        c = costs.draft_ratio("mtp") if costs.drafts_by.get("mtp") else None
    else:
        c = costs.draft_ratio()
    drafted = summary.drafted_by.get(source, 0)
    accepted = summary.accepted_by.get(source, 0)
    ratio = vs_plain(summary, costs)
    speed = ratio[0] if ratio else None
    if drafted >= RARELY * summary.steps and (speed is None or speed >= 1.0):
        return None
    cost = f"its drafts cost {c:.2f} of a target step each" if c is not None else "its cost here is not measured yet"
    need = needed_acceptance(costs, c) if c is not None else None
    needs = ("no acceptance would pay for them" if c is not None and need is None
             else f"they pay only above {need:.0%} acceptance" if need is not None else "")
    if drafted:
        got = f"{accepted}/{drafted} accepted ({accepted / drafted:.0%})"
    elif record is not None and any(record.seen):
        got = f"its acceptance so far this session {record.slow[0]:.0%}"
    else:
        got = "never tried, so its acceptance is unmeasured"
    name = NAMES[source]
    if drafted < RARELY * summary.steps:
        head = f"{name} drafted {'nothing' if not drafted else f'in {drafted} of {summary.steps} steps'}"
    else:
        head = f"{name} is not paying ({speed:.2f}x of plain decoding)"
    text = f"{head}: {cost}" + (f", {needs}" if needs else "") + f"; {got}"
    return Notice("drafter-not-paying", text, AUTO_DOES[source])
