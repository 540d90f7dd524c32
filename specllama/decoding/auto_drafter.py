"""`--drafter auto`: per sequence and per step, the draft that the cost model says pays most.

Composed of the suffix drafter (free drafts with calibrated per-token confidence) and, when one is
loaded, the model drafter (whose acceptance is tracked per draft position by an PositionAcceptance view per
sequence, the way the planner does for `--drafter model -k auto`). Each step, for each sequence:

    suffix rate = E(n) / (T(n+1)/T(1))           its own proposal, cut by confidence (cost 0)
    model rate  = E(K) / (K*c + T(K+1)/T(1))     the view's best K (0 when the draft cannot pay)

and the larger one wins when it beats plain decoding (rate 1); else nothing is proposed. The
Proposal's source says which ("suffix" or "model"). Under a fixed K (`-k 3`) there is no rate to
compare: the suffix draft when it matched anything, else the model's, else nothing.

The suffix drafter always sees every step (its live index follows the committed text); the model
drafter's cache catches up by itself when it is next asked (ModelDrafter.propose decodes the
backlog), so steps it sits out cost it nothing.
"""

from __future__ import annotations

from typing import Callable, Sequence

from specllama.decoding.acceptance import PositionAcceptance
from specllama.decoding.drafters import Drafter, DraftRequest, Proposal
from specllama.decoding.request import AUTO
from specllama.decoding.suffix_drafter import SuffixDrafter, proposal_rate


class AutoDrafter:
    name = "auto"
    sizes_itself = True  # the engine gives a cap; the choice and the length are made here

    def __init__(self, suffix: SuffixDrafter, model: Drafter | None = None,
                 model_policy: PositionAcceptance | None = None,
                 cost_ratio: Callable[[int], float | None] | None = None):
        self.suffix = suffix
        self.model = model
        self.model_policy = model_policy  # shared long-run record; None: the model is never chosen under -k auto
        self.cost_ratio = cost_ratio or suffix.cost_ratio
        self.views: dict[int, PositionAcceptance] = {}  # slot -> the model's acceptance on that sequence's text
        self.chosen: dict[str, int] = {"suffix": 0, "model": 0, "none": 0}  # steps, for tests and stats

    def propose(self, requests: Sequence[DraftRequest]) -> list[Proposal]:
        suffix = self.suffix.propose(requests)
        out: list[Proposal] = []
        for_model: list[tuple[int, DraftRequest]] = []
        for i, (r, s) in enumerate(zip(requests, suffix)):
            choice, k = self._choose(r, s)
            self.chosen[choice] += 1
            if choice == "suffix":
                out.append(s)
            else:
                out.append(Proposal([], source=""))
                if choice == "model":
                    for_model.append((i, DraftRequest(r.seq, r.committed, k, r.config, r.rng)))
        if for_model:  # every sequence the model drafts for, in one lockstep call
            for (i, r), p in zip(for_model, self.model.propose([r for _, r in for_model])):
                p.source = p.source or self.model.name
                view = self._view(r.seq)
                if p.confidence is None and view is not None:
                    # This text's per-position acceptance: what the engine cuts by in a batch.
                    p.confidence = list(view.fast[:len(p.tokens)])
                out[i] = p
        return out

    def _choose(self, r: DraftRequest, s: Proposal) -> tuple[str, int]:
        """("suffix" | "model" | "none", the model's K). Sources the planner benched for this text
        (r.avoid) are not chosen."""
        if r.config.k != AUTO:
            if s.tokens:
                return "suffix", 0
            return ("model", r.k) if self.model is not None else ("none", 0)
        view = self._view(r.seq) if "model" not in r.avoid else None
        model_k = min(view.choose(), r.k) if view is not None else 0
        model_rate = (view.rate(model_k) or 1.0) if model_k else 1.0
        suffix_rate = proposal_rate(s, self.cost_ratio) if "suffix" not in r.avoid else 1.0
        if s.tokens and suffix_rate > max(1.0, model_rate):
            if view is not None:
                view.observe(0, 0)  # unobserved positions drift back to the long-run record
            return "suffix", 0
        if model_k and model_rate > 1.0:
            return "model", model_k
        if view is not None:
            view.observe(0, 0)
        return "none", 0

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
        if proposal.source == self.suffix.name:
            self.suffix.observe(seq, proposal, n_accepted)
        elif self.model is not None and proposal.source == self.model.name:
            self.model.observe(seq, proposal, n_accepted)
            view = self._view(seq)
            if view is not None:
                view.observe(len(proposal.tokens), n_accepted)

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
