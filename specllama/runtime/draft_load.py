"""Whether `--drafter auto` loads the draft model: only where it pays for its load, and the same
answer for two identical runs.

The prediction: the best rate over draft lengths 1..K_AUTO_MAX (cost/model.py) on the costs known
here (the target's T(n)/T(1), the draft's cost c), at the acceptance LOAD_ACCEPTANCE. Without a
measured draft cost there is no prediction and the draft is not loaded (on CPUs a draft model
rarely pays: docs/benchmarks.md; `specllama costs` or one `--drafter model` run measures it).

The margin, LOAD_AT = 1.10x at 90 % acceptance, and why:
- 90 %, not 100 %: a rate at 100 % acceptance is a ceiling no text reaches. The 0.5B draft of the
  default pair was accepted 88 % of the time at K = 1 on the held-out prompts
  (bench/measured/vm-20261122-0100.md), less at longer drafts; PositionAcceptance starts every draft
  model at 0.9 for the same reason. On the 16-core curve (T(2)/T(1) 1.15, T(4)/T(1) 1.27, draft
  c 0.67: docs/benchmarks.md) the ceiling says 1.25x, 90 % says 1.07x, and `model:k=auto` measured
  1.00x there: a ceiling would load the draft where it gained nothing.
- 10 % over plain decoding: the draft costs a load (DRAFT_LOAD_S below, from a file already in the
  page cache; a cold disk takes longer) and its memory (592 MB more resident for the default pair,
  weights and its 4096-token cache). At 1.10x a session wins the load back after LOAD_PAYBACK_S
  (6.6 s) of generation, about one answer of 130 tokens here; at 1.02x it would take 31 s. Below
  that the memory is spent for a gain a user cannot see.
- the same answer twice: the prediction moves between runs as every run's steps refine the learnt
  costs (two identical `specllama run` calls here predicted 0.92x, then 1.01x, and the second
  loaded the draft). A decision is therefore kept (runtime/cost_store.py) and revisited only when
  the prediction has moved by more than REVISIT since it was made: more than that run-to-run
  wobble, so only a real change (new threads, a remeasured curve, a draft run that measured c)
  changes what is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass

from specllama.decoding.cost.model import Ratio, best_possible_rate, predicted_speedup
from specllama.decoding.request import K_AUTO_MAX
from specllama.runtime.cost_store import RecordedDecision

LOAD_ACCEPTANCE = 0.9
LOAD_AT = 1.10
REVISIT = 0.10
# Measured here (scripts/measure/draft_load.py, bench/measured/vm-20261125-draft-load.md, 2 threads,
# 5 interleaved rounds): the default pair's 0.5B draft and its context add 0.60 s to a load from the
# page cache (median: 1.37 s with it, 0.78 s without).
DRAFT_LOAD_S = 0.60
LOAD_PAYBACK_S = DRAFT_LOAD_S / (1 - 1 / LOAD_AT)  # generation time after which a 1.10x gain has repaid the load


@dataclass(frozen=True)
class DraftLoad:
    """The decision and the status line that says it."""

    load: bool
    predicted: float | None  # the best predicted rate at LOAD_ACCEPTANCE; None: the draft's cost is unknown here
    kept: bool  # an earlier run's decision, kept because the prediction moved less than REVISIT
    text: str  # one line
    detail: str  # the numbers behind it, for -v

    @property
    def record(self) -> RecordedDecision | None:
        """What to keep for the next run (a kept decision keeps the prediction it was made on)."""
        return None if self.predicted is None or self.kept else RecordedDecision(self.load, self.predicted)


def predicted_rate(ratio: Ratio, draft_cost: float) -> float:
    """The best rate over draft lengths at LOAD_ACCEPTANCE, in plain steps (1.0: plain decoding)."""
    rates = [r for k in range(1, K_AUTO_MAX + 1)
             if (r := predicted_speedup(ratio, k, LOAD_ACCEPTANCE, draft_cost)) is not None]
    return max(rates, default=1.0)


def decide(draft_name: str, ratio: Ratio, draft_cost: float | None, last: RecordedDecision | None) -> DraftLoad:
    """Pure: the decision from the costs known here and the last decision kept for this draft."""
    if draft_cost is None:
        return DraftLoad(False, None, False,
                         "drafting from the text itself: the draft model's cost here is unknown (`specllama costs` "
                         "measures it)",
                         f"--drafter auto loads the draft model {draft_name} only where its measured cost says it "
                         f"pays {LOAD_AT:.2f}x at {LOAD_ACCEPTANCE:.0%} acceptance")
    predicted = predicted_rate(ratio, draft_cost)
    kept = last is not None and abs(predicted - last.predicted) <= REVISIT
    load = last.load if kept else predicted >= LOAD_AT
    why = (f"predicted {predicted:.2f}x at {LOAD_ACCEPTANCE:.0%} acceptance on this machine's costs (draft cost "
           f"c = {draft_cost:.2f} of a target step); it is loaded at {LOAD_AT:.2f}x or more (its load and "
           f"memory pay back after ~{LOAD_PAYBACK_S:.0f} s of generation at that rate)")
    if kept:
        why += (f"; an earlier run here decided on {last.predicted:.2f}x and the prediction moved less than "
                f"{REVISIT:.2f}, so that decision stands")
    if load:
        return DraftLoad(True, predicted, kept, f"drafting with the draft model {draft_name} or the text itself, "
                         f"whichever pays (predicted up to {predicted:.2f}x)", why)
    return DraftLoad(False, predicted, kept, f"drafting from the text itself: the draft model would not pay here "
                     f"({predicted:.2f}x predicted)", why)


# The target's own MTP head (`--drafter auto` on a GGUF with nextn layers) is decided alike, with
# what differs: nothing to download and little to load (one layer, its cache), and a head loaded
# where it does not pay is not fed (llama/mtp.py follow), so loading it costs little where its
# cost is unknown: it is loaded, and its first drafts time it. Once its cost c is known here, the
# best case decides: its rate at 100 % acceptance over draft lengths 1..K_AUTO_MAX. Where even that
# is below MTP_LOAD_AT (llama.cpp #23752's Metal run: 0.885x at 100 % acceptance) no text can make
# it pay, and feeding it is only a cost; the decision is kept and revisited as the draft model's.
MTP_LOAD_AT = 1.05


def decide_head(ratio: Ratio, head_cost: float | None, last: RecordedDecision | None) -> DraftLoad:
    """Pure: whether auto loads the target's MTP head, from its cost learnt here (None: not yet)."""
    if head_cost is None:
        return DraftLoad(True, None, False, "the model's MTP head drafts where it pays (its cost here is not "
                         "measured yet)", "its first drafts time it; a later run loads it only where it can pay")
    predicted = best_possible_rate(ratio, head_cost, K_AUTO_MAX)
    kept = last is not None and abs(predicted - last.predicted) <= REVISIT
    load = last.load if kept else predicted >= MTP_LOAD_AT
    why = (f"at best {predicted:.2f}x (every draft accepted) on this machine's costs (its cost c = {head_cost:.2f} "
           f"of a target step a draft position); it is loaded at {MTP_LOAD_AT:.2f}x or more")
    if kept:
        why += (f"; an earlier run here decided on {last.predicted:.2f}x and the prediction moved less than "
                f"{REVISIT:.2f}, so that decision stands")
    if load:
        return DraftLoad(True, predicted, kept, f"the model's MTP head drafts where it pays (at best {predicted:.2f}x)",
                         why)
    return DraftLoad(False, predicted, kept, f"the model's MTP head is not loaded: it cannot pay here (at best "
                     f"{predicted:.2f}x with every draft accepted; --drafter mtp loads it anyway)", why)
