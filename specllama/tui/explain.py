"""Why the panel shows what it shows, in one sentence computed from what steps cost here."""

from __future__ import annotations

from specllama.decoding.cost.model import break_even_acceptance

K_EXPLAINED = 2  # the smallest K that is more than one guess; K = 1 rarely pays anywhere


def why_no_drafts(costs, drafter: str) -> str:
    """Said when K auto asked for no drafts at all in an answer although a drafter is on: the cost
    model found that drafting would not pay on this machine. `costs` is the runtime's StepCosts."""
    if costs is None:
        return "no drafts: K auto chose 0 at every step"
    draft_cost = costs.draft_ratio(drafter) if drafter in ("model", "mtp") else 0.0
    if draft_cost is None:
        return "no drafts: K auto chose 0 at every step"
    alpha = break_even_acceptance(costs.ratio, K_EXPLAINED, draft_cost)
    if alpha is None:
        return (f"no drafts: on this machine even 100 % acceptance at K = {K_EXPLAINED} would not pay "
                "(`specllama costs` shows the numbers)")
    return (f"no drafts: on this machine the draft would need ≥{alpha:.0%} acceptance at K = {K_EXPLAINED} "
            "to pay").replace("%", " %")
