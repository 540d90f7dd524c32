"""The bet each draft source makes, in numbers (issue 42 item 6): what one of its drafted tokens
costs, the per-position acceptance at which a draft of n tokens pays on this machine's costs, and
what the policy believes of the source before it has judged a single draft.

Why spell it out: with plain decoding at full speed, a draft pays only where acceptance is high. On
the 2-core machine here, two verified rows cost 1.71 one-row steps (bench/measured/
vm-20261125-heldout-greedy.md), so a one-token guess must be right 71 % of the time just to break
even, while a 64-token copy, priced near prefill speed, needs far less per token than its length
suggests. `specllama costs` prints these lines so a user can see why `auto` drafts what it drafts.
Every number comes from the constants the policy itself decides with; nothing here decides.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from specllama.decoding.cost.model import Ratio, break_even_acceptance, causal_rows
from specllama.decoding.policy.free_drafts import CERTAIN_FLOOR, LIKELY_MAX, LIKELY_ODDS, MIN_GAIN
from specllama.decoding.request import K_AUTO_MAX, K_COPY_MAX
from specllama.decoding.suffix_drafter import NEAR_CERTAIN_MATCH
from specllama.decoding.suffix_groups import COLD_FLOORS, MATCH_LABELS, OWN_COLD_FLOORS
from specllama.runtime.draft_load import LOAD_ACCEPTANCE, LOAD_AT, MTP_LOAD_AT

LENGTHS = (1, 2, 4, 8, 15, 31, 63)  # draft lengths shown: the short guesses and the long copies (whole blocks of rows)
NEVER = "never"  # even 100 % acceptance loses at this length
UNKNOWN = "unknown"  # the source's cost, or the cost of the batch that verifies it, is not known here


@dataclass(frozen=True)
class SourceBet:
    source: str  # the drafted_by name: suffix, grammar, model, mtp
    draft_cost: float | None  # one drafted token's cost as a fraction of a plain step; None: not measured here
    needs: dict[int, float | str]  # draft length -> per-position acceptance that breaks even, or NEVER / UNKNOWN
    believes: str  # what the policy assumes before any of this source's drafts is judged
    sends: str  # when and how far it drafts
    # Where going back to plain decoding costs (a GPU's CUDA graphs: cost/online.py's switch cost), the same
    # for a draft right after plain steps, which pays it; None where it costs nothing.
    needs_after_plain: dict[int, float | str] | None = None

    def to_dict(self) -> dict:
        out = {"source": self.source, "draft_cost": self.draft_cost,
               "break_even": {str(n): a for n, a in self.needs.items()}, "believes": self.believes, "sends": self.sends}
        if self.needs_after_plain is not None:
            out["break_even_after_plain"] = {str(n): a for n, a in self.needs_after_plain.items()}
        return out


def _needs(ratio: Ratio, draft_cost: float | None, longest: int) -> dict[int, float | str]:
    out: dict[int, float | str] = {}
    for n in (n for n in LENGTHS if n <= longest):
        if draft_cost is None or ratio(causal_rows(n)) is None:
            out[n] = UNKNOWN
        else:
            alpha = break_even_acceptance(ratio, n, draft_cost)
            out[n] = NEVER if alpha is None else alpha
    return out


def source_bets(ratio: Ratio, draft_cost: float | None = None, *, has_draft: bool = False,
                mtp_cost: float | None = None, has_mtp: bool = False, switch: float = 0.0) -> list[SourceBet]:
    """The bets of the sources this load can draft from: the text and the grammar always, the draft
    model when the pair has one (draft_cost None: its cost is not measured yet), the MTP heads when
    the target has them. `switch`: what going back to plain decoding after a draft costs, in plain
    steps (StepCosts.switch_ratio: 0 where it is none); a draft after plain steps pays it."""
    bets = _bets(ratio, draft_cost, has_draft, mtp_cost, has_mtp)
    if switch <= 0:
        return bets
    def after_plain(n: int) -> float | None:
        r = ratio(n)
        return None if r is None else r + switch if n > 1 else r
    return [replace(bet, needs_after_plain=again.needs)
            for bet, again in zip(bets, _bets(after_plain, draft_cost, has_draft, mtp_cost, has_mtp))]


def _bets(ratio: Ratio, draft_cost: float | None, has_draft: bool, mtp_cost: float | None,
          has_mtp: bool) -> list[SourceBet]:
    free = _needs(ratio, 0.0, K_COPY_MAX)  # the text's and the grammar's drafts cost no decode: one table for both
    floors, own = (", ".join(f"{label}: {floor:.0%}" for label, floor in zip(MATCH_LABELS[1:], cold[1:]))
                   for cold in (COLD_FLOORS, OWN_COLD_FLOORS))
    bets = [
        SourceBet("suffix", 0.0, free,
                  f"text seen once before is accepted at least this often, by tokens matched: {floors} "
                  f"(a match in the text's own output: {own}); "
                  "each proposal judged, sent or not, moves that toward what this run and this text show",
                  f"the length where tokens per verify time peak, if that promises {MIN_GAIN:.2f}x plain, "
                  f"up to {K_AUTO_MAX} tokens ({LIKELY_MAX} while each is at {LIKELY_ODDS:.0%} or more), "
                  f"{K_COPY_MAX} in a copy in progress ({NEAR_CERTAIN_MATCH}+ tokens "
                  f"matched), whose first {CERTAIN_FLOOR} go whatever the costs say"),
        SourceBet("grammar", 0.0, free,
                  "100 %: a token the grammar forces is the only one the target may produce",
                  "every forced token, appended after the other drafts"),
    ]
    if has_draft:
        bets.append(SourceBet("model", draft_cost, _needs(ratio, draft_cost, K_AUTO_MAX),
                              f"{LOAD_ACCEPTANCE:.0%} per position, then what its drafts show",
                              f"loaded under auto only where {LOAD_ACCEPTANCE:.0%} acceptance predicts "
                              f"{LOAD_AT:.2f}x or more; its length by the same cost model, to {K_AUTO_MAX}"))
    if has_mtp:
        bets.append(SourceBet("mtp", mtp_cost, _needs(ratio, mtp_cost, K_AUTO_MAX),
                              "what the target's own heads show as they draft",
                              f"loaded under auto unless its learnt cost says even 100 % acceptance stays below "
                              f"{MTP_LOAD_AT:.2f}x; fed only while it may be chosen; its length by the same cost "
                              f"model, to {K_AUTO_MAX}"))
    return bets


def bet_lines(bets: list[SourceBet], switch: float = 0.0) -> list[str]:
    """The text `specllama costs` prints: one block per source (`switch` as given to source_bets)."""
    lines = ["what each draft source bets (per-position acceptance a draft of n tokens needs to break even):"]
    if switch > 0:
        lines.append(f"  (going back to plain decoding after a draft costs +{switch:.2f} plain steps here: a draft "
                     "after plain steps pays it, one that follows a draft does not)")
    for bet in bets:
        cost = "free (no model decode)" if bet.draft_cost == 0.0 else (
            "not measured here yet" if bet.draft_cost is None else f"{bet.draft_cost:.2f} of a target step per token")
        lines += [f"  {bet.source}: drafting costs {cost}", f"    needs   {_needs_text(bet.needs)}"]
        if bet.needs_after_plain is not None:
            lines.append(f"    after plain steps {_needs_text(bet.needs_after_plain)}")
        lines += [f"    assumes {bet.believes}", f"    sends   {bet.sends}"]
    return lines


def _needs_text(needs: dict[int, float | str]) -> str:
    return "  ".join(f"n={n}: " + (a if isinstance(a, str) else f"{a:.0%}") for n, a in needs.items())
