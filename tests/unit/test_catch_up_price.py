"""A decoding source that sat out must first decode the text it has not seen: the draft model times what
that costs (its prompts and long catch-ups), and `auto` (source_choice.choose_source) prices a share of it
into the step that would catch up, so a one-token draft is not bought with a 100-token catch-up."""

import numpy as np

from specllama.decoding.acceptance import PositionAcceptance
from specllama.decoding.cost.online import Prior, StepCosts
from specllama.decoding.drafters import BACKLOG_ROW_GUESS, DrafterBase, DraftRequest, ModelDrafter
from specllama.decoding.policy.base import PolicyKit
from specllama.decoding.policy.catch_up_price import CATCH_UP_SHARE
from specllama.decoding.policy.model_auto import ModelAuto
from specllama.decoding.policy.source_choice import choose_source
from specllama.decoding.proposal import Proposal
from specllama.decoding.request import GenerationConfig
from specllama.decoding.verifiers import VERIFIERS
from tests.support.fake_llm import FakeClock, FakeContext, counting_rule


def drafter(cost_per_row: float = 0.01, one_token: float = 1.0) -> tuple[ModelDrafter, FakeClock]:
    clock = FakeClock()
    ctx = FakeContext(counting_rule(), clock=clock, cost=lambda rows: one_token if rows == 1 else cost_per_row * rows)
    return ModelDrafter(ctx, clock=clock), clock


def test_the_draft_prices_what_it_has_not_seen_from_its_own_timed_prompts():
    d, _ = drafter(cost_per_row=0.01)
    prompt = list(range(1, 41))
    d.prefill(0, prompt)  # 39 tokens decoded without logits: 0.39 s
    assert (d.backlog_tokens, d.backlog_seconds) == (39, 0.39)
    assert d.catch_up_seconds(0, prompt) == 0.0  # one token left: a usual step's own
    longer = prompt + list(range(50, 70))
    assert abs(d.catch_up_seconds(0, longer) - 21 * 0.01) < 1e-9
    other = [99] + prompt[1:]  # a new prompt sharing nothing: all of it
    assert abs(d.catch_up_seconds(0, other) - 40 * 0.01) < 1e-9


def test_before_any_prompt_is_timed_a_backlog_token_is_guessed_from_a_one_token_decode():
    d, _ = drafter(one_token=1.0)
    assert d.catch_up_seconds(0, list(range(1, 30))) == 0.0  # nothing timed at all: unpriced
    d.propose([DraftRequest(0, [5, 6], 2, GenerationConfig(), np.random.default_rng(0))])
    assert d.backlog_tokens == 0 and d.timed_decodes == 2
    seconds = d.catch_up_seconds(0, [5, 6, 7, 8] + list(range(10, 30)))
    one_token = d.timed_seconds / d.timed_decodes  # its draft positions' decodes: (0.02 + 1.0) / 2
    assert abs(seconds - (24 - 3) * BACKLOG_ROW_GUESS * one_token) < 1e-9  # 24 tokens, 3 held (5, 6 and its draft 7)


def record(acceptance: float) -> PositionAcceptance:
    return PositionAcceptance(verify_ratio=lambda n: 1.0 + 0.2 * (n - 1), draft_cost=0.1, k_max=4, prior=acceptance)


def test_auto_buys_no_draft_with_a_long_catch_up_but_a_short_one():
    rec = record(0.8)
    k = rec.choose()
    assert k > 0 and rec.rate(k) > 1.0
    ratio = lambda n: 1.0 + 0.2 * (n - 1)  # noqa: E731
    nothing = Proposal(())
    assert choose_source(nothing, {"model": rec}, 8, frozenset(), ratio) == ("model", k)
    assert choose_source(nothing, {"model": rec}, 8, frozenset(), ratio, lambda name: 0.2) == ("model", k)
    # a catch-up of 10 plain steps, CATCH_UP_SHARE of it on this step: plain decoding is better
    assert rec.expected_tokens(k) / (rec.cost(k) + 10 * CATCH_UP_SHARE) < 1.0
    assert choose_source(nothing, {"model": rec}, 8, frozenset(), ratio, lambda name: 10.0) == ("none", 0)


class Behind(DrafterBase):
    """A draft model stand-in whose catch-up on the text costs what the test says."""

    name = "model"

    def __init__(self, seconds: float):
        self.seconds = seconds

    def catch_up_seconds(self, seq, text):
        return self.seconds


def test_the_draft_models_own_auto_sits_out_a_step_whose_catch_up_would_lose():
    """`--drafter model -k auto` (model_auto.py) prices the catch-up too: the same record asks for drafts
    with the draft caught up, and for none with a catch-up of 10 plain steps (T(1) 0.05 s) to pay first."""
    ratio = lambda n: 1.0 + 0.2 * (n - 1)  # noqa: E731
    for seconds, drafts in [(0.0, True), (0.5, False)]:
        costs = StepCosts(Prior(ratio, 0.05, learned=True))
        records = {"model": PositionAcceptance(costs.ratio, 0.1, k_max=4, prior=0.8)}
        policy = ModelAuto(Behind(seconds), PolicyKit({"model": Behind(seconds)}, costs, records, VERIFIERS["causal"]))
        policy.start(0, [1, 2, 3])
        assert policy.ask(8, alone=False).drafts == drafts
