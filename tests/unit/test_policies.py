"""Draft policies (specllama/decoding/policy/): per request, which source drafts and how much is
sent. Each is driven here as the engine drives it (ask, propose, review, cut, observe), on the
suffix drafter and a scripted model stand-in, with the costs given by a prior."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from specllama.decoding.acceptance import Calibrator, PositionAcceptance, TextRecord
from specllama.decoding.cost.model import best_length
from specllama.decoding.cost.online import Prior, StepCosts
from specllama.decoding.drafters import DrafterBase, DraftRequest, Proposal
from specllama.decoding.engine import Engine, GenerationConfig
from specllama.decoding.policy import POLICIES, PolicyBase, PolicyKit, default_policy, policy_for, register
from specllama.decoding.policy.confident_auto import ConfidentAuto
from specllama.decoding.policy.fixed import FixedLength, FixedSuffixThenModel
from specllama.decoding.policy.free_drafts import free_length
from specllama.decoding.policy.model_auto import ModelAuto
from specllama.decoding.policy.plain import Plain
from specllama.decoding.policy.source_choice import SourceChoice
from specllama.decoding.suffix_drafter import SuffixDrafter
from specllama.decoding.suffix_groups import DRAFT_GROUPS
from specllama.decoding.verifiers import VERIFIERS
from specllama.errors import SpecllamaError
from tests.support.fake_llm import FakeContext, counting_rule, judged

FLAT = lambda n: 1.0 if 1 <= n <= 16 else None  # noqa: E731  verifying is free: any likely draft pays
STEEP = lambda n: 1 + 0.8 * (n - 1) if 1 <= n <= 16 else None  # noqa: E731  each extra verified token: 0.8
REPEATED = [5, 6, 7, 8, 9, 10] * 6 + [5, 6]  # a long, frequent match: the suffix drafter is sure
FRESH = list(range(1, 30))  # nothing repeats: no suffix draft
ONCE = list(range(10, 30)) + list(range(10, 14))  # one earlier occurrence: raw confidence 0.5


class ScriptedModel(DrafterBase):
    """A draft model stand-in that proposes token 1 and counts its calls."""
    name = "model"
    free = False

    def __init__(self):
        self.calls = 0
        self.asked: list[int] = []  # the k of every request, in order

    def propose(self, requests):
        self.calls += 1
        self.asked += [r.k for r in requests]
        return [Proposal([1] * r.k) for r in requests]


def kit(ratio, drafters, records=None) -> PolicyKit:
    return PolicyKit(drafters, StepCosts(Prior(ratio, 0.05, learned=True)), records or {}, VERIFIERS["causal"])


def draft(policy, committed, room=8, alone=True) -> Proposal:
    """One step's drafting for a lone request, as Engine._draft does it, then the policy's cut."""
    ask, proposal = policy.ask(room, alone), Proposal([])
    while ask is not None and ask.drafts:
        proposal = ask.drafter.propose([DraftRequest(0, list(committed), ask.k, GenerationConfig(k="auto"),
                                                     np.random.default_rng(0))])[0]
        proposal = proposal.keep(ask.k)
        proposal = replace(proposal, source=proposal.source or ask.drafter.name)
        proposal, ask = policy.review(proposal)
    return policy.cut(proposal)[0]


# ---- which policy a request gets -------------------------------------------------------------

def test_the_drafter_and_k_name_the_default_policy():
    suffix, model = SuffixDrafter(), ScriptedModel()
    k = kit(FLAT, {"suffix": suffix, "model": model}, {"model": PositionAcceptance(FLAT, 0.1)})
    of = lambda **c: default_policy(GenerationConfig(**c), k)  # noqa: E731
    assert isinstance(of(drafter="none"), Plain) and isinstance(of(drafter="suffix", k=0), Plain)
    assert isinstance(of(drafter="suffix", k=3), FixedLength) and isinstance(of(drafter="model", k=3), FixedLength)
    assert isinstance(of(drafter="suffix"), ConfidentAuto) and isinstance(of(drafter="model"), ModelAuto)
    assert isinstance(of(drafter="auto"), SourceChoice) and isinstance(of(drafter="auto", k=2), FixedSuffixThenModel)
    without_model = kit(FLAT, {"suffix": suffix})
    with pytest.raises(SpecllamaError, match="no draft model is loaded"):
        default_policy(GenerationConfig(drafter="model"), without_model)


def test_a_registered_policy_is_chosen_by_name_and_an_unknown_one_refused():
    @register("test-never")
    class Never(Plain):
        name = "test-never"

        def __init__(self, config, kit):
            pass
    try:
        assert isinstance(policy_for(GenerationConfig(policy="test-never"), kit(FLAT, {})), Never)
        with pytest.raises(SpecllamaError, match="unknown draft policy 'nope'"):
            Engine(FakeContext(counting_rule())).generate([1, 2], GenerationConfig(policy="nope"))
    finally:
        del POLICIES["test-never"]


def test_a_policy_registered_by_name_runs_in_the_engine():
    """The seam end to end: a policy that drafts the next counting token with the suffix drafter's
    slot unused, registered and named by a request, decides what the engine verifies."""
    class Guess(DrafterBase):
        name = "guess"

        def propose(self, requests):
            return [Proposal([(r.committed[-1] + 1) % 32 or 1] * 1) for r in requests]

    @register("test-guess")
    class GuessNext(PolicyBase):
        name = "test-guess"

        def __init__(self, config, kit):
            self.drafters = (Guess(),)

        def ask(self, room, alone):
            from specllama.decoding.policy import Ask
            return Ask(self.drafters[0], min(room, 1))
    try:
        events = list(Engine(FakeContext(counting_rule())).generate([1, 2], GenerationConfig(policy="test-guess",
                                                                                          max_tokens=9)))
        summary = events[-1].summary
        assert summary.tokens == 9 and summary.accepted == summary.drafted > 0 and summary.drafted_by == {"guess": summary.drafted}
    finally:
        del POLICIES["test-guess"]


# ---- a fixed K and -k auto with the suffix drafter ---------------------------------------------

def test_a_fixed_k_sends_what_matched_and_auto_cuts_where_it_pays():
    """A fixed K sends what matched, up to K; under -k auto the drafter still reports all it
    matched, with a confidence per token, and the policy cuts (a lone match at 0.5 a token does
    not pay where each verified token costs 0.8 of a decode)."""
    d = SuffixDrafter()
    assert len(draft(FixedLength(d, 4), ONCE).tokens) == 4
    assert draft(ConfidentAuto(d, kit(STEEP, {"suffix": d})), ONCE).tokens == ()
    assert len(draft(ConfidentAuto(d, kit(FLAT, {"suffix": d})), ONCE, room=4).tokens) == 4


def test_a_text_whose_drafts_fail_stops_drafting_and_a_new_text_starts_afresh():
    """The calibrator is shared by all texts; each text's own record (acceptance.TextRecord, kept by
    the drafter per slot) moves its odds by how its proposals fare, sent or not."""
    cal = Calibrator(groups=DRAFT_GROUPS, prior_weight=1000.0)  # stuck at its prior: only the text's record moves
    d = SuffixDrafter(calibrator=cal)
    cheap = lambda n: 1 + 0.2 * (n - 1) if 1 <= n <= 16 else None  # noqa: E731
    policy = ConfidentAuto(d, kit(cheap, {"suffix": d}))
    policy.start(0, ONCE)
    lengths = []
    for _ in range(8):
        p = draft(policy, ONCE)
        lengths.append(len(p.tokens))
        if p.tokens:
            d.observe(0, judged(p, (0.0,)))  # every draft rejected
        policy.observe(judged(p, (0.0,) if p.tokens else ()))
    assert lengths[0] > 0 and lengths[-1] == 0 and sum(d.texts[0].accepted.values()) == 0.0
    policy = ConfidentAuto(d, kit(cheap, {"suffix": d}))
    policy.start(0, ONCE)  # the next request: its own record
    assert draft(policy, ONCE).tokens


def test_a_text_that_stopped_drafting_starts_again_when_its_proposals_prove_right():
    """Unsent proposals are judged against what the text did next: a text whose early drafts failed
    drafts again once the text is seen following its proposals, not after a fixed fade."""
    cal = Calibrator(groups=DRAFT_GROUPS, prior_weight=1000.0)
    d = SuffixDrafter(calibrator=cal)
    cheap = lambda n: 1 + 0.2 * (n - 1) if 1 <= n <= 16 else None  # noqa: E731
    policy = ConfidentAuto(d, kit(cheap, {"suffix": d}))
    text = list(range(10, 40)) + list(range(10, 13))  # a quote of the text's start begins
    policy.start(0, text)
    for _ in range(4):
        p = draft(policy, text)
        if p.tokens:
            d.observe(0, judged(p, (0.0,)))
    assert not draft(policy, text).tokens
    for n in range(13, 30):  # the text goes on quoting: each plain step commits the proposal's first token
        text = text + [n]
        if draft(policy, text).tokens:
            break
    # Measured: it drafts again at the first step whose last proposal proved right (13); judging only
    # sent drafts, at 17, when the match had grown into the next class, one this text had not failed.
    assert n <= 14, n


def test_text_record_moves_a_class_toward_what_this_text_shows():
    record = TextRecord()
    for _ in range(16):
        record.observe(3, 1.0)
    assert record.predict(0.9, 3) == pytest.approx((16 + 8 * 0.9) / 24)
    assert record.predict(0.9, 1) == 0.9  # another group: this text has not shown it yet
    assert best_length([0.3], lambda n: 1 + 0.25 * (n - 1)) == 1  # 1.3 / 1.25 = 1.04x
    assert best_length([0.3], lambda n: 1 + 0.25 * (n - 1), min_gain=1.05) == 0  # not enough


# ---- --drafter auto: which source -------------------------------------------------------------

def auto_with(ratio, draft_cost, prior=0.9):
    suffix, model = SuffixDrafter(), ScriptedModel()
    record = PositionAcceptance(ratio, draft_cost, k_max=8, prior=prior)
    return SourceChoice(suffix, model, kit(ratio, {"suffix": suffix, "model": model}, {"model": record})), model


def test_auto_takes_the_suffix_draft_when_it_beats_the_model():
    auto, model = auto_with(FLAT, draft_cost=0.5)
    p = draft(auto, REPEATED)
    assert p.source == "suffix" and p.tokens[:2] == (7, 8) and model.calls == 0


def test_auto_uses_the_model_where_it_pays_and_nothing_matched():
    auto, model = auto_with(FLAT, draft_cost=0.05)
    p = draft(auto, FRESH)
    assert p.source == "model" and p.tokens and model.calls == 1
    # The text's per-position acceptance rides along: the planner cuts drafts by it in a batch.
    assert len(p.confidence) == len(p.tokens) and all(0 < c <= 1 for c in p.confidence)


def test_auto_proposes_nothing_where_neither_pays():
    steep_model = lambda n: 1.0 + 0.6 * (n - 1) if 1 <= n <= 16 else None  # noqa: E731
    auto, model = auto_with(steep_model, draft_cost=0.5)  # the 2-core machine: the draft never pays
    assert draft(auto, FRESH).tokens == () and model.calls == 0


def test_auto_without_a_model_uses_the_suffix_drafter_alone():
    suffix = SuffixDrafter()
    auto = SourceChoice(suffix, None, kit(FLAT, {"suffix": suffix}))
    assert draft(auto, REPEATED).source == "suffix"
    assert draft(auto, FRESH).tokens == ()


def test_auto_feeds_each_source_back_to_its_own_estimate():
    auto, _ = auto_with(FLAT, draft_cost=0.05)
    p = draft(auto, FRESH)
    before = list(auto.acceptance.fast)
    auto.observe(judged(p, (0.0,)))  # the model's first draft was rejected
    assert auto.acceptance.fast[0] < before[0]
    auto, _ = auto_with(FLAT, draft_cost=0.5)  # a dearer draft: the sure suffix draft wins
    s = draft(auto, REPEATED)
    assert s.source == "suffix"
    before = list(auto.acceptance.fast)
    auto.observe(judged(s, (1.0,) * len(s.tokens)))
    assert auto.acceptance.fast == before  # the model's view saw no judgement (a fresh record: no drift either)


def test_a_realised_loss_benches_the_source_for_this_text():
    """Whatever the estimates say, a source whose steps realise less than plain decoding is
    skipped for a while (realised.py): here every suffix step is charged as two plain steps."""
    suffix = SuffixDrafter()
    auto = SourceChoice(suffix, None, kit(FLAT, {"suffix": suffix}))
    for _ in range(6):
        p = draft(auto, REPEATED)
        if not p.tokens:
            break
        auto.observe(judged(p, (0.0,), seconds=0.1, t1=0.05))  # 1 token for 2 plain steps' time
    assert draft(auto, REPEATED).tokens == () and "suffix" in auto.realised.avoid()


@pytest.mark.parametrize("make", [
    lambda suffix: SourceChoice(suffix, None, kit(FLAT, {"suffix": suffix})),
    lambda suffix: ConfidentAuto(suffix, kit(FLAT, {"suffix": suffix})),
], ids=["auto", "suffix"])
def test_a_source_back_from_the_bench_sends_a_short_draft_until_one_is_judged(make):
    """The bench says the estimates were wrong on this text: its first draft back is held to
    PROBATION tokens (realised.py), however sure the estimates are, and the full length returns
    once a draft of its was judged."""
    from specllama.decoding.policy.draft_ramp import PROVEN
    from specllama.decoding.realised import PROBATION
    suffix = SuffixDrafter()
    auto = make(suffix)
    auto.ramp.longest = PROVEN  # a text that held a long run: the ramp (draft_ramp.py) lets its copies go whole
    full = len(draft(auto, REPEATED).tokens)
    assert full > PROBATION  # a long, sure copy: the cut alone would send it whole
    while "suffix" not in auto.realised.avoid():  # steps that realise half of plain: benched
        auto.observe(judged(draft(auto, REPEATED), (0.0,), seconds=0.1, t1=0.05))
    while "suffix" in auto.realised.avoid():  # plain steps while it sits out
        assert draft(auto, REPEATED).tokens == ()
        auto.observe(judged(Proposal([]), (), seconds=0.05, t1=0.05))
    back = draft(auto, REPEATED)
    assert back.source == "suffix" and len(back.tokens) == PROBATION
    auto.observe(judged(back, (1.0,) * PROBATION, seconds=0.05, t1=0.05))  # judged, and it held
    assert len(draft(auto, REPEATED).tokens) == full


@pytest.mark.parametrize("make", [
    lambda suffix: SourceChoice(suffix, None, kit(FLAT, {"suffix": suffix})),
    lambda suffix: ConfidentAuto(suffix, kit(FLAT, {"suffix": suffix})),
], ids=["auto", "suffix"])
def test_a_sure_copy_drafts_short_until_its_text_has_held_a_run(make):
    """draft_ramp.py: a text's free drafts grow with the longest run it accepted, near-certain ones
    too, until a run of PROVEN tokens lets them go whole; verifying is free here, so only the ramp cuts."""
    from specllama.decoding.policy.draft_ramp import FIRST, GROWTH, PROVEN
    suffix = SuffixDrafter()
    auto = make(suffix)
    first = draft(auto, REPEATED, room=32)
    assert len(first.tokens) == FIRST and first.certain == FIRST  # a sure copy, held back
    auto.observe(judged(first, (1.0, 1.0, 0.0)))  # two of them held
    grown = draft(auto, REPEATED, room=32)
    assert len(grown.tokens) == GROWTH * 2 == PROVEN
    auto.observe(judged(grown, (1.0,) * PROVEN))  # a run of PROVEN: this text copies
    whole = draft(auto, REPEATED, room=32)
    assert len(whole.tokens) > PROVEN and len(whole.tokens) == whole.certain


def test_the_ramp_cuts_after_the_cost_cut_so_a_copy_that_pays_long_still_starts():
    """Where a short draft would not pay but the whole copy does (a batch of any size costs 4 plain
    steps), the text's first draft is the copy cut to FIRST, not nothing: the costs are a guess,
    and the draft that would correct them must be sent (cut before the cost cut, the H200's copies
    lost 10 %: bench/measured/vm-20261129-r18-late-ramp)."""
    from specllama.decoding.policy.draft_ramp import FIRST
    dear = lambda n: 1.0 if n == 1 else 4.0 if 1 < n <= 16 else None  # noqa: E731
    suffix = SuffixDrafter()
    auto = SourceChoice(suffix, None, kit(dear, {"suffix": suffix}))
    likely = Proposal(tuple(range(12)), confidence=(0.9,) * 12, source="suffix")  # likely, not near-certain
    assert free_length(likely.confidence[:FIRST], dear) == 0  # alone, its first FIRST tokens would not pay
    assert len(auto.cut(likely)[0].tokens) == FIRST


def test_a_grammars_forced_tokens_do_not_prove_a_text():
    """Forced tokens ride after a draft (grammar.py) and are always accepted: only the drafter's own
    count towards the run that lets its copies go long."""
    from specllama.decoding.policy.draft_ramp import DraftRamp
    ramp = DraftRamp()
    mixed = Proposal(tuple(range(10)), source="suffix", sources=("suffix",) * 2 + ("grammar",) * 8)
    ramp.observe(judged(mixed, (1.0,) * 10), "suffix")
    assert ramp.longest == 2
    ramp.observe(judged(Proposal(tuple(range(9)), source="grammar"), (1.0,) * 9), "suffix")  # forced alone
    assert ramp.longest == 2
    ramp.observe(judged(Proposal(tuple(range(6)), source="suffix"), (1.0,) * 5 + (0.0,)), "suffix")
    assert ramp.longest == 5


def test_the_draft_model_back_from_the_bench_is_asked_for_a_short_draft():
    from specllama.decoding.realised import PROBATION
    model = ScriptedModel()
    auto = ModelAuto(model, kit(FLAT, {"model": model}, {"model": PositionAcceptance(FLAT, 0.1)}))
    full = auto.ask(8, True).k
    assert full > PROBATION
    while "model" not in auto.realised.avoid():
        auto.observe(judged(draft(auto, FRESH), (0.0,), seconds=0.1, t1=0.05))
    while "model" in auto.realised.avoid():
        auto.observe(judged(Proposal([]), (), seconds=0.05, t1=0.05))
    assert auto.ask(8, True).k == PROBATION
    auto.observe(judged(draft(auto, FRESH), (1.0,) * PROBATION, seconds=0.05, t1=0.05))
    assert auto.ask(8, True).k == full


def test_auto_asks_a_draft_model_back_from_the_bench_for_a_short_draft():
    """In `auto` too the draft model decodes no more than the probation lets through."""
    from specllama.decoding.realised import PROBATION
    auto, model = auto_with(FLAT, draft_cost=0.05)
    assert draft(auto, FRESH).source == "model" and model.asked[-1] > PROBATION
    while "model" not in auto.realised.avoid():  # the realised check alone benches it: its record stays sure
        auto.realised.observe("model", 1, seconds=0.1, t1=0.05)
    while "model" in auto.realised.avoid():
        auto.observe(judged(Proposal([]), (), seconds=0.05, t1=0.05))
    back = draft(auto, FRESH)
    assert back.source == "model" and model.asked[-1] == len(back.tokens) == PROBATION


def test_sampling_acceptance_is_learnt_from_the_verifiers_odds_not_coin_flips():
    # Under sampling a deterministic draft token is accepted with the target's p(x): an estimate fed
    # the odds sits at p after a few steps whatever the coins said; fed 1/0 it swings with them.
    from specllama.decoding.acceptance import PositionAcceptance
    ratio = lambda n: 1.0 + 0.3 * (n - 1)  # noqa: E731
    by_odds, by_coins = PositionAcceptance(ratio, None, k_max=4), PositionAcceptance(ratio, None, k_max=4)
    for _ in range(40):  # every step: the first draft accepted (p = 0.9), the second rejected (p = 0.9)
        by_odds.observe(4, 1, odds=(0.9, 0.9))
        by_coins.observe(4, 1)
    assert by_odds.fast[0] == pytest.approx(0.9, abs=0.01) and by_odds.fast[1] == pytest.approx(0.9, abs=0.01)
    assert by_coins.fast[1] < 0.1  # the coin flips' verdict: position 2 never passes
    # The suffix drafter's text record is fed the same odds: (accepted + w * calibrated) / (judged + w), w = 8.
    d = SuffixDrafter(calibrator=Calibrator(groups=DRAFT_GROUPS, prior_weight=1e9))  # the calibrator held at its prior
    p = d.propose([DraftRequest(0, ONCE, 8, GenerationConfig(k="auto"), np.random.default_rng(0))])[0]
    calibrated = p.confidence[0]
    for _ in range(30):
        d.observe(0, judged(p.keep(1), (0.45,)))  # rejected, but the target gave it fair odds
    after = d.propose([DraftRequest(0, ONCE, 8, GenerationConfig(k="auto"), np.random.default_rng(0))])[0]
    assert after.confidence[0] == pytest.approx((30 * 0.45 + 8 * calibrated) / 38)


def test_auto_takes_a_near_certain_copy_even_when_the_costs_say_no_batch_pays():
    from specllama.decoding.policy.source_choice import choose_source

    dear = lambda n: float(n) if n >= 1 else None  # noqa: E731
    guess = Proposal([1, 2, 3], confidence=[0.9, 0.9, 0.9])
    copy = Proposal([1, 2, 3], confidence=[0.9, 0.9, 0.9], certain=3)
    assert choose_source(guess, None, 8, frozenset(), dear) == ("none", 0)
    assert choose_source(copy, None, 8, frozenset(), dear) == ("suffix", 0)
    assert choose_source(copy, None, 8, frozenset({"suffix"}), dear) == ("none", 0)  # benched: it lost here
