"""Recurrent and hybrid models roll back as attention-only ones do (llama/rollback.py), on the toys
of tests/support/toy_models.py: qwen35 and lfm2 by llama.cpp's state snapshots, mamba by state
checkpoints and replay, llama by dropping cells. Exact mode throughout: a row's logits do not
depend on the batch it is decoded in, so "the state a plain run has" is checked bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from specllama.decoding.catch_up import MERGED, SPLIT, CatchUpChoice
from specllama.decoding.drafters import DrafterBase, ModelDrafter
from specllama.decoding.engine import Engine, GenerationConfig, TokenEvent
from specllama.decoding.proposal import Proposal
from specllama.decoding.request import K_MAX
from specllama.decoding.suffix_drafter import SuffixDrafter
from specllama.decoding.verifiers import VERIFIERS
from specllama.errors import SpecllamaError
from specllama.llama.context import DecodeContext
from specllama.llama.model import GGUFModel
from specllama.llama.rollback import CELLS, CHECKPOINTS, SNAPSHOT_DEPTH, SNAPSHOTS, rollback_table
from tests.support.fake_llm import FakeClock, FakeContext, counting_rule

METHOD = {"qwen35": SNAPSHOTS, "lfm2": SNAPSHOTS, "mamba": CHECKPOINTS, "llama": CELLS}
ARCHS = list(METHOD)
K = 6  # the longest draft exact mode verifies on Q8_0 weights (7 rows a decode)
PROMPT = "The quick brown fox jumps over the lazy dog. The quick brown fox"


@pytest.fixture(scope="module")
def models(toy_models):
    loaded: dict[str, GGUFModel] = {}

    def get(arch: str) -> GGUFModel:
        if arch not in loaded:
            loaded[arch] = GGUFModel(toy_models[arch], exact=True)
        return loaded[arch]

    return get


def context(model: GGUFModel, **kwargs) -> DecodeContext:
    return DecodeContext(model, n_ctx=512, n_threads=1, exact=True, **kwargs)


def plain_next_logits(model: GGUFModel, prompt: list[int], tokens: list[int]) -> np.ndarray:
    """The logits after prompt + tokens in a fresh context: the prompt in one decode, then one
    token at a time, as plain decoding goes."""
    ctx = context(model)
    row = ctx.decode(prompt, logits="last")[0]
    for t in tokens:
        row = ctx.decode([t], logits="last")[0]
    ctx.close()
    return row


def test_the_snapshot_depth_is_the_longest_draft_a_user_may_ask_for():
    assert SNAPSHOT_DEPTH == K_MAX


@pytest.mark.parametrize("arch", ARCHS)
def test_each_toy_rolls_back_as_llama_cpp_lists_its_architecture(models, arch):
    ctx = context(models(arch))
    assert ctx.rollback_method == METHOD[arch] == rollback_table()[arch]
    assert ctx.snapshot_depth == (SNAPSHOT_DEPTH if METHOD[arch] == SNAPSHOTS else 0)


@pytest.mark.parametrize("arch", ARCHS)
def test_rolling_back_1_to_k_drafted_tokens_leaves_the_state_of_a_plain_run(models, arch):
    model = models(arch)
    prompt = model.tokenize(PROMPT)
    ctx = context(model)
    ctx.decode(prompt, logits="none")
    rng = np.random.default_rng(0)
    kept: list[int] = []
    for drop in range(1, K + 1):
        batch = [int(t) for t in rng.integers(100, 20000, K + 1)]  # [last] + K drafts, as a verification decodes
        ctx.prepare_rollback(0, K)
        ctx.decode(batch, logits="all")
        ctx.rollback(ctx.n_past - drop)
        kept += batch[:K + 1 - drop]
        assert ctx.tokens == prompt + kept
        probe = int(rng.integers(100, 20000))
        got = ctx.decode([probe], logits="last")[0]
        kept.append(probe)
        assert np.array_equal(got, plain_next_logits(model, prompt, kept)), f"after dropping {drop}"
    # Snapshots and cells drop a verification's tail in place; checkpoints restore and replay.
    assert (ctx.replayed_tokens > 0) == (METHOD[arch] == CHECKPOINTS)


@pytest.mark.parametrize("arch", ["qwen35", "mamba"])
@pytest.mark.parametrize("checkpointed", [True, False])
def test_rolling_back_past_the_last_decode_restores_a_checkpoint_or_starts_over(models, arch, checkpointed):
    """A conversation's next turn that changes the last one's tail: further back than any snapshot
    reaches. From the checkpoint after the prompt only the tokens since are decoded again; with no
    checkpoint, everything is."""
    model = models(arch)
    prompt = model.tokenize(PROMPT)
    ctx = context(model)
    ctx.decode(prompt, logits="none")
    if checkpointed:
        ctx.checkpoint(0)
    answer = [1000 + i for i in range(12)]
    for t in answer:  # one token at a time: each decode leaves one token's snapshot
        ctx.decode([t], logits="none")
    ctx.rollback(len(prompt) + 5)
    assert ctx.tokens == prompt + answer[:5]
    assert ctx.replayed_tokens == (5 if checkpointed else len(prompt) + 5)
    got = ctx.decode([7], logits="last")[0]
    assert np.array_equal(got, plain_next_logits(model, prompt, answer[:5] + [7]))


class OracleDrafter(DrafterBase):
    """Proposes k tokens of which the first j are the plain run's next tokens and the rest are
    wrong, j cycling through 0..k: every rollback depth from 1 to k, and full acceptance, occur."""

    name = "suffix"

    def __init__(self, reference: list[int], prompt_len: int):
        self.reference, self.prompt_len, self.calls = reference, prompt_len, 0

    def propose(self, requests):
        out = []
        for r in requests:
            at = len(r.committed) - self.prompt_len  # the reference's index of the first token to draft
            good = self.calls % (r.k + 1)
            self.calls += 1
            truth = self.reference[at:at + r.k]
            out.append(Proposal(truth[:good] + [(t + 7) % 50000 for t in truth[good:]]))
        return out


def greedy(engine: Engine, prompt: list[int], drafter: str, k=3, max_tokens: int = 48):
    events, summary = engine.generate(prompt, GenerationConfig(drafter=drafter, k=k, max_tokens=max_tokens)).tokens()
    return [e.id for e in events], summary


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("k", [1, 3, K])
def test_greedy_output_with_rejected_drafts_is_plain_greedy_output(models, arch, k):
    model = models(arch)
    prompt = model.tokenize(PROMPT)
    plain, _ = greedy(Engine(context(model)), prompt, "none")
    engine = Engine(context(model), {"suffix": OracleDrafter(plain, len(prompt))})
    got, summary = greedy(engine, prompt, "suffix", k=k)
    assert got == plain
    assert 0 < summary.accepted < summary.drafted  # drafts were accepted, and rejected at every depth


@pytest.mark.parametrize("arch", ARCHS)
def test_the_suffix_drafter_gives_plain_greedy_output(models, arch):
    model = models(arch)
    prompt = model.tokenize(PROMPT * 3)
    plain, _ = greedy(Engine(context(model)), prompt, "none", max_tokens=64)
    got, _ = greedy(Engine(context(model), {"suffix": SuffixDrafter()}), prompt, "suffix", k="auto", max_tokens=64)
    assert got == plain


@pytest.mark.parametrize("arch", ARCHS)
def test_a_prompt_whose_tail_differs_from_the_cache_reuses_what_it_can(models, arch):
    """A re-sent conversation whose cached tail differs (an agent's next request, a chat's turn
    that re-renders the last answer): no error, the same answer as from an empty cache, and the
    common prefix is not decoded again."""
    model = models(arch)
    first = model.tokenize(PROMPT)
    engine = Engine(context(model))
    answer, _ = greedy(engine, first, "none", max_tokens=16)
    second = first + answer[:6] + model.tokenize(" and then something else", add_special=False)
    again, summary = greedy(engine, second, "none", max_tokens=16)
    fresh, _ = greedy(Engine(context(model)), second, "none", max_tokens=16)
    assert again == fresh
    assert summary.reused_tokens >= len(first) + 5


class ReplayingContext(FakeContext):
    """A fake backend whose rollback costs what a checkpoint model's does: a replay decode of the
    tokens since its checkpoint (here: every dropped token costs 10 ms of virtual time)."""

    rollback_method = "checkpoints"

    def rollback(self, n_past: int, seq: int = 0) -> None:
        self.clock.now += 0.010 * (self.past(seq) - n_past)
        super().rollback(n_past, seq)


class RecordingOracle(OracleDrafter):
    def __init__(self, reference, prompt_len):
        super().__init__(reference, prompt_len)
        self.outcomes = []

    def observe(self, seq, outcome):
        self.outcomes.append(outcome)


def test_what_each_rollback_costs_reaches_the_cost_model_and_the_steps_record():
    clock = FakeClock()
    ctx = ReplayingContext(counting_rule(), clock=clock, cost=lambda rows: 0.050 + 0.005 * rows)
    prompt = [1, 2, 3]
    plain, _ = greedy(Engine(FakeContext(counting_rule())), prompt, "none", max_tokens=40)
    drafter = RecordingOracle(plain, len(prompt))
    engine = Engine(ctx, {"suffix": drafter}, clock=clock)
    engine.generate(prompt, GenerationConfig(drafter="suffix", k=4, max_tokens=40)).drain()
    rejected = [o for o in drafter.outcomes if o.n_accepted < o.drafted]
    assert rejected and all(o.t_rollback == pytest.approx(0.010 * (o.drafted - o.n_accepted)) for o in rejected)
    assert all(o.t_rollback == 0 for o in drafter.outcomes if o.n_accepted == o.drafted)
    assert engine.costs.rollback_seconds_per_token() == pytest.approx(0.010)
    assert engine.costs.rollback_ratio() > 0


@pytest.mark.parametrize("arch", ["mamba", "llama"])
def test_real_rollbacks_are_timed(models, arch):
    model = models(arch)
    prompt = model.tokenize(PROMPT)
    plain, _ = greedy(Engine(context(model)), prompt, "none")
    engine = Engine(context(model), {"suffix": OracleDrafter(plain, len(prompt))})
    greedy(engine, prompt, "suffix", k=3)
    assert len(engine.costs.rollback) > 0 and engine.costs.rollback_seconds_per_token() > 0


@pytest.mark.parametrize("catch_up", [MERGED, SPLIT])
@pytest.mark.parametrize("draft_arch", ["mamba", "qwen35", "llama"])
def test_a_recurrent_or_hybrid_draft_model_takes_its_rejected_drafts_back(models, draft_arch, catch_up):
    """The draft model decodes its drafts one at a time, so no snapshot reaches back over them:
    it returns to the checkpoint taken before drafting and decodes only the accepted ones again,
    never the whole conversation; so whether its catch-up rides in its first draft decode or goes
    one token a decode (decoding/catch_up.py), and on a plain transformer too."""
    target, draft = models("llama"), models(draft_arch)
    prompt = target.tokenize(PROMPT)
    plain, _ = greedy(Engine(context(target)), prompt, "none")
    draft_ctx = context(draft)
    drafter = ModelDrafter(draft_ctx, catch_up=CatchUpChoice(catch_up))
    got, summary = greedy(Engine(context(target), {"model": drafter}), prompt, "model", k=3)
    assert got == plain
    if draft_arch != "llama":  # the target's own file as its draft: every draft accepted, nothing to take back
        assert summary.drafted > summary.accepted
        assert draft_ctx.rollbacks > 0 and draft_ctx.replayed_tokens <= summary.accepted  # accepted drafts, never the prompt
    # Each position timed once whichever way: a split catch-up's decode is a cost, not a position.
    assert drafter.timing()[0] <= summary.drafted and (catch_up == MERGED or draft_ctx.llama_calls > drafter.timing()[0])


def test_stairs_verification_is_refused_on_a_hybrid_model_with_a_clear_error(models):
    ctx = DecodeContext(models("qwen35"), n_ctx=256, n_threads=1, n_seq_max=4, unified=True)
    with pytest.raises(SpecllamaError, match="recurrent or hybrid .* use --verify causal"):
        VERIFIERS["stairs"].check(ctx)


@pytest.mark.parametrize("arch", ["qwen35", "mamba"])
def test_several_conversations_in_one_decode_give_each_ones_own_answer(models, arch):
    """A batch or a server decodes several sequences together; a recurrent cache keeps a state per
    sequence, and each one's rollbacks touch only its own."""
    from specllama.decoding.request import Request

    model = models(arch)
    prompts = [model.tokenize(f"{PROMPT} number {i}, {PROMPT}") for i in range(3)]
    config = GenerationConfig(drafter="suffix", k=3, max_tokens=24)
    alone = [greedy(Engine(context(model), {"suffix": SuffixDrafter()}), p, "suffix", k=3, max_tokens=24)[0]
             for p in prompts]
    engine = Engine(context(model, n_seq_max=3), {"suffix": SuffixDrafter()})
    answers: dict[int, list[int]] = {i: [] for i in range(3)}
    for tag, event in engine.run_many([Request(p, config, tag=i) for i, p in enumerate(prompts)], parallel=3):
        if isinstance(event, TokenEvent):
            answers[tag].append(event.id)
    assert [answers[i] for i in range(3)] == alone
