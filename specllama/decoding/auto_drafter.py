"""`--drafter auto`: per sequence and per step, the suffix drafter's proposal, the draft model's,
or nothing, whichever the planner's `choose_source` says pays most.

Composed of the suffix drafter (free drafts with calibrated per-token confidence) and, when one is
loaded, the model drafter, whose acceptance is tracked per draft position by a PositionAcceptance
view per sequence (the way the planner does for `--drafter model -k auto`). This class reports:
the suffix proposal and the model's view go to `choose_source` (planner.py, the one home of the
decision), and the model decodes only for the sequences it was chosen for. The Proposal's source
says which ("suffix" or "model"); a chosen suffix draft comes whole, and the planner cuts it.

The suffix drafter always sees every step (its live index follows the committed text); the model
drafter's cache catches up by itself when it is next asked (ModelDrafter.propose decodes the
backlog), so steps it sits out cost it nothing.
"""

from __future__ import annotations

from typing import Sequence

from specllama.decoding.acceptance import PositionAcceptance
from specllama.decoding.cost.model import Ratio
from specllama.decoding.drafters import Drafter, DraftRequest, Proposal
from specllama.decoding.planner import choose_source
from specllama.decoding.request import AUTO
from specllama.decoding.suffix_drafter import SuffixDrafter


class AutoDrafter:
    name = "auto"
    confident = True  # the engine gives a cap; every proposal carries a confidence per token

    def __init__(self, suffix: SuffixDrafter, model: Drafter | None = None,
                 model_policy: PositionAcceptance | None = None, *, cost_ratio: Ratio):
        self.suffix = suffix
        self.model = model
        self.model_policy = model_policy  # shared long-run record; None: the model is never chosen under -k auto
        self.cost_ratio = cost_ratio  # T(n)/T(1) a suffix draft is priced on: the engine's live costs
        self.views: dict[int, PositionAcceptance] = {}  # slot -> the model's acceptance on that sequence's text
        self.chosen: dict[str, int] = {"suffix": 0, "model": 0, "none": 0}  # steps, for tests and stats

    def propose(self, requests: Sequence[DraftRequest]) -> list[Proposal]:
        suffix = self.suffix.propose(requests)
        out: list[Proposal] = []
        for_model: list[tuple[int, DraftRequest]] = []
        for i, (r, s) in enumerate(zip(requests, suffix)):
            if r.config.k == AUTO:
                view = self._view(r.seq)
                choice, k = choose_source(s, view, r.k, r.avoid, self.cost_ratio)
                if view is not None and choice != "model":
                    view.observe(0, 0)  # unobserved positions drift back to the long-run record
            else:  # a fixed K: no rate to compare; the suffix draft when it matched, else the model's
                choice, k = ("suffix", 0) if s.tokens else ("model", r.k) if self.model is not None else ("none", 0)
            self.chosen[choice] += 1
            if choice == "model":
                for_model.append((i, DraftRequest(r.seq, r.committed, k, r.config, r.rng)))
            # The suffix proposal whole when chosen (the planner cuts it), else emptied: it still
            # hears the step (observe) as one without a suffix draft.
            s.tokens = s.tokens if choice == "suffix" else []
            out.append(s)
        if for_model:  # every sequence the model drafts for, in one lockstep call
            for (i, r), p in zip(for_model, self.model.propose([r for _, r in for_model])):
                p.source = p.source or self.model.name
                view = self._view(r.seq)
                if p.confidence is None and view is not None:
                    # This text's per-position acceptance: what the engine cuts by in a batch.
                    p.confidence = list(view.fast[:len(p.tokens)])
                out[i] = p
        return out

    def _view(self, seq: int) -> PositionAcceptance | None:
        if self.model is None or self.model_policy is None:
            return None
        view = self.views.get(seq)
        if view is None:
            view = self.views[seq] = self.model_policy.for_text()
        return view

    def prefill(self, seq: int, prompt: Sequence[int]) -> None:
        self.suffix.prefill(seq, prompt)
        self.views.pop(seq, None)  # a new text: a fresh view (for_text restarts the fast estimates)
        view = self._view(seq)
        # The model digests the prompt now only when it may be used at once; else it catches up
        # on its first proposal (a long prompt costs the draft seconds).
        if view is not None and view.choose() > 0:
            self.model.prefill(seq, prompt)

    def rollback(self, seq: int, n_tokens: int) -> None:
        self.suffix.rollback(seq, n_tokens)
        if self.model is not None:
            self.model.rollback(seq, n_tokens)

    def observe(self, seq: int, proposal: Proposal, n_accepted: int) -> None:
        if self.model is not None and proposal.source == self.model.name:
            self.suffix.observe(seq, Proposal([]), 0)  # a step without a suffix draft
            self.model.observe(seq, proposal, n_accepted)
            view = self._view(seq)
            if view is not None:
                view.observe(len(proposal.tokens), n_accepted)
        else:
            self.suffix.observe(seq, proposal, n_accepted)

    def finish(self, seq: int, committed: Sequence[int]) -> None:
        self.suffix.finish(seq, committed)
        if self.model is not None:
            self.model.finish(seq, committed)
        self.views.pop(seq, None)

    def reset(self) -> None:
        self.suffix.reset()
        if self.model is not None:
            self.model.reset()
        self.views.clear()
