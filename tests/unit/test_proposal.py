"""A proposal cannot go out of step (issue 40): it is immutable, and every cut is `keep(n)`, which
cuts each per-token array alike; the cutters (the engine, the policies' free-draft cuts, the
planner, a grammar) return new proposals and leave the one they were given as it was."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from specllama.decoding.cost.online import Prior, StepCosts
from specllama.decoding.drafters import DraftRequest
from specllama.decoding.engine import Engine, GenerationConfig
from specllama.decoding.policy.free_drafts import cut_free, long_enough
from specllama.decoding.proposal import Proposal
from specllama.decoding.request import K_AUTO_MAX, Request
from specllama.decoding.suffix_drafter import SuffixDrafter, SuffixProposal
from tests.support.fake_llm import FakeContext, noisy_rule

STEEP = lambda n: 1 + 0.8 * (n - 1) if 1 <= n <= 64 else None  # noqa: E731  each extra verified token: 0.8


def _full(n: int = 6) -> SuffixProposal:
    return SuffixProposal(list(range(n)), np.ones((n, 4)), [0.9] * n, "suffix", 4, [0.5] * n, 9, "live",
                          sources=["suffix"] * (n - 2) + ["grammar"] * 2)


def test_keep_cuts_every_per_token_array_alike_and_the_certain_lead():
    p = _full()
    kept = p.keep(3)
    assert kept.tokens == (0, 1, 2) and kept.q.shape == (3, 4) and kept.confidence == (0.9,) * 3
    assert kept.sources == ("suffix",) * 3 and kept.raw_confidence == (0.5,) * 3 and kept.certain == 3
    assert type(kept) is SuffixProposal and (kept.source, kept.match_length, kept.where) == ("suffix", 9, "live")
    assert p.keep(6) is p and p.keep(99) is p and p.keep(0).tokens == () and p.keep(-1).tokens == ()
    assert len(p.tokens) == 6 and p.certain == 4  # the original is as it was


def test_a_proposal_cannot_be_changed_in_place():
    p = _full()
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.tokens = (1,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.certain = 0
    assert isinstance(p.tokens, tuple) and isinstance(p.confidence, tuple) and isinstance(p.sources, tuple)
    with pytest.raises(ValueError):
        p.q[0, 0] = 2.0  # read-only
    assert not hasattr(p.tokens, "append")


def test_the_free_draft_cuts_return_new_proposals():
    long_uncertain = Proposal(list(range(20)), confidence=[0.3] * 20, source="suffix")
    capped = long_enough(long_uncertain)
    assert len(capped.tokens) == K_AUTO_MAX and len(capped.confidence) == K_AUTO_MAX
    cut = cut_free(capped, STEEP)
    assert cut.tokens == () and cut.confidence == ()
    assert len(long_uncertain.tokens) == 20 and len(capped.tokens) == K_AUTO_MAX  # neither was touched


class Recording(SuffixDrafter):
    """The suffix drafter, remembering each proposal it made and what it held when made."""

    def __init__(self):
        super().__init__()
        self.made: list[tuple[Proposal, tuple]] = []

    def propose(self, requests: list[DraftRequest]) -> list[Proposal]:
        proposals = super().propose(requests)
        self.made += [(p, (p.tokens, p.confidence, p.certain, p.source)) for p in proposals]
        return proposals


def test_no_step_changes_a_proposal_a_drafter_made():
    """Through the engine's cut to K, the policy's review and cut, and the planner's joint cut of a
    batch: what the drafter returned is never edited (before, each cut trimmed it in place)."""
    drafter = Recording()
    engine = Engine(FakeContext(noisy_rule(3)), {"suffix": drafter}, costs=StepCosts(Prior(STEEP, 0.0, learned=True)))
    prompts = [[5, 6, 7, 5, 6, 7, 5, 6, 7] * 3, [9, 8, 9, 8, 9, 8] * 4]
    requests = [Request(p, GenerationConfig(drafter="suffix", k="auto", max_tokens=24), tag=i) for i, p in enumerate(prompts)]
    list(engine.run_many(requests, parallel=2))
    assert any(len(p.tokens) for p, _ in drafter.made)
    for proposal, held in drafter.made:
        assert (proposal.tokens, proposal.confidence, proposal.certain, proposal.source) == held

