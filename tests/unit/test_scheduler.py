"""Several prompts per decode (Engine.run_many) against scripted fake models: the same text as
alone, one decode per step for all sequences, continuous admission, isolation of failures and
cancels, exact mode's row limit; and the cost model that chooses N and each sequence's K."""

from __future__ import annotations

import pytest

from specllama.decoding.acceptance import PositionAcceptance
from specllama.decoding.catch_up import SPLIT, CatchUpChoice
from specllama.decoding.cost.model import LengthChoice, choose_lengths, choose_parallel
from specllama.decoding.cost.online import Prior, StepCosts
from specllama.decoding.drafters import ModelDrafter
from specllama.decoding.engine import DoneEvent, Engine, FailedEvent, GenerationConfig, Request, StepEvent, TokenEvent
from specllama.decoding.sampling import SamplingParams
from specllama.decoding.suffix_drafter import SuffixDrafter
from tests.support.engines import PROMPTS, alone, model_engine
from tests.support.fake_llm import FakeClock, FakeContext, counting_rule, noisy_rule, random_rule


def costed_engine(n: int, curve, drafters, rule=None) -> Engine:
    """An engine on a fake backend whose steps cost curve(rows) seconds (beyond the curve: a whole
    second per row), its costs known from the start (the prior) and learnt alike from its steps."""
    clock = FakeClock()
    seconds = lambda rows: curve(rows) if curve(rows) is not None else float(rows)  # noqa: E731
    costs = StepCosts(Prior(seconds, 1.0, learned=True))
    return Engine(FakeContext(rule or counting_rule(), n_seq_max=n, clock=clock, cost=seconds), drafters(costs),
                  costs=costs, clock=clock)


def together(engine: Engine, config: GenerationConfig, prompts, parallel) -> dict:
    """tag -> (token ids, done event or failure) from run_many."""
    out: dict = {}
    for tag, event in engine.run_many([Request(p, config, tag=i) for i, p in enumerate(prompts)], parallel):
        ids, end = out.setdefault(tag, ([], None))
        if isinstance(event, TokenEvent):
            ids.append(event.id)
        elif isinstance(event, (DoneEvent, FailedEvent)):
            assert end is None, "a request ended twice"
            out[tag] = (ids, event)
    return out


def test_one_token_draft_decodes_keep_the_text_and_every_draft_decode_one_token_a_sequence():
    """The split catch-up (decoding/catch_up.py, a GPU's graphs kept on one shape): a catch-up of two
    tokens is two decodes, so every draft decode after the prompt holds one token a sequence, alone
    and in a batch; the text is the same."""
    config = GenerationConfig(drafter="model", k=3, max_tokens=25)
    for n, prompts in ((1, PROMPTS[:1]), (3, PROMPTS[:3])):
        draft = FakeContext(counting_rule(), n_seq_max=n)
        engine = Engine(FakeContext(noisy_rule(4), n_seq_max=n), {"model": ModelDrafter(draft, catch_up=CatchUpChoice(SPLIT))})
        results = together(engine, config, prompts, parallel=n)
        for i, prompt in enumerate(prompts):
            assert results[i][0] == alone(config, prompt)
        prefills = sum(1 for p in prompts if len(p) > 1)
        steps = draft.batch_sizes[prefills:]
        assert steps and max(steps) <= n and sum(results[i][1].summary.accepted for i in range(len(prompts))) > 0
        assert n > 1 or set(steps) == {1}
    plain = FakeContext(counting_rule())
    Engine(FakeContext(noisy_rule(4)), {"model": ModelDrafter(plain)}).generate(PROMPTS[0], config).tokens()
    assert max(plain.batch_sizes[1:]) == 2  # what it changes: catch-ups of two tokens


@pytest.mark.parametrize("k", [0, 1, 3])
def test_n_sequences_together_give_each_one_its_text_alone(k):
    config = GenerationConfig(drafter="model", k=k, max_tokens=25)
    engine = model_engine(3)
    results = together(engine, config, PROMPTS, parallel=3)
    for i, prompt in enumerate(PROMPTS):
        ids, done = results[i]
        assert isinstance(done, DoneEvent) and ids == alone(config, prompt)
        assert done.summary.text == "".join(f"<{t}>" for t in ids)
    # Batched for real: steps decoded several sequences' rows at once.
    assert max(engine.target.batch_sizes[len(PROMPTS):]) > k + 1


def test_sampling_follows_each_requests_seed_whatever_else_is_decoded():
    config = GenerationConfig(drafter="model", k=2, max_tokens=20, sampling=SamplingParams(temperature=1.0, seed=5))
    rule, draft_rule = random_rule(3), random_rule(7)
    results = together(model_engine(4, rule, draft_rule), config, PROMPTS[:4], parallel=4)
    for i, prompt in enumerate(PROMPTS[:4]):
        assert results[i][0] == alone(config, prompt, rule, draft_rule)


def test_one_step_is_one_target_decode_and_one_draft_decode_per_draft_position():
    engine = model_engine(3, rule=counting_rule())  # the draft is always right: every step drafts k
    config = GenerationConfig(drafter="model", k=3, max_tokens=8)
    target, draft = engine.target, engine.drafters["model"].ctx
    list(engine.run_many([Request(p, config, tag=i) for i, p in enumerate(PROMPTS[:3])], 3))
    steps = target.decode_calls - 3  # minus the three prefills
    assert steps == 2  # 4 tokens a step (3 drafts + the bonus), 8 tokens
    # Per step the draft makes k decodes, each for all three sequences (lockstep): the first one
    # catches up on what it has not seen, the others decode one draft each.
    assert draft.decode_calls == 3 + steps * 3
    assert max(draft.batch_sizes[3:]) <= 3 * 2 and target.batch_sizes[3:] == [3 * (3 + 1)] * steps


def test_a_finished_prompt_makes_room_for_the_next_at_once():
    ends = [None, 3, None, None, None]  # the second prompt's target ends early
    engine = Engine(FakeContext(counting_rule(end_after=None), n_seq_max=2))
    events = list(engine.run_many([Request(p, GenerationConfig(drafter="none", k=0, max_tokens=2 if e else 6), tag=i)
                                   for i, (p, e) in enumerate(zip(PROMPTS, ends))], parallel=2))
    order = [tag for tag, e in events if isinstance(e, DoneEvent)]
    assert sorted(order) == [0, 1, 2, 3, 4] and order[0] == 1  # the short one first
    # Never more than two sequences in a step, and no step with one while a prompt waited (each
    # step's rows as its StepEvents say; prefills are decodes of their own, not steps).
    started: set = set()
    step_rows = []  # (rows in the step's decode, whether every prompt had started by then)
    for tag, e in events:
        if isinstance(e, TokenEvent):
            started.add(tag)
        elif isinstance(e, StepEvent):
            step_rows.append((e.batch_tokens, len(started) == len(PROMPTS)))
    assert max(rows for rows, _ in step_rows) == 2
    assert all(rows == 2 for rows, all_started in step_rows if not all_started)
    assert any(rows == 1 for rows, _ in step_rows)  # the last prompt ran alone at the end


def test_a_prompt_that_cannot_run_fails_alone():
    engine = Engine(FakeContext(counting_rule(), n_ctx=16, n_seq_max=2))
    config = GenerationConfig(drafter="none", k=0, max_tokens=5)
    results = together(engine, config, [[1, 2], list(range(1, 30)), [3, 4]], parallel=2)
    assert isinstance(results[1][1], FailedEvent) and "prompt is 29 tokens" in results[1][1].message
    assert isinstance(results[0][1], DoneEvent) and isinstance(results[2][1], DoneEvent)
    assert results[0][0] == [3, 4, 5, 6, 7] and results[2][0] == [5, 6, 7, 8, 9]


def test_cancelling_one_request_leaves_the_others_running():
    engine = Engine(FakeContext(counting_rule(), n_seq_max=3))
    config = GenerationConfig(drafter="none", k=0, max_tokens=10)
    ends: dict = {}
    requests = [Request(p, config, tag=i) for i, p in enumerate(PROMPTS[:3])]
    for tag, event in engine.run_many(requests, 3):
        if isinstance(event, StepEvent) and tag == 1:
            requests[1].cancel.cancel()
        if isinstance(event, DoneEvent):
            ends[tag] = event.summary
    assert ends[1].finish_reason == "cancelled" and ends[1].tokens == 1
    assert ends[0].finish_reason == ends[2].finish_reason == "length" and ends[0].tokens == 10


def test_a_new_prompt_takes_the_slot_that_already_holds_its_prefix():
    engine = Engine(FakeContext(counting_rule(), n_seq_max=3))
    config = GenerationConfig(drafter="none", k=0, max_tokens=3)
    system = [30, 31, 30, 31, 30, 31]
    list(engine.run_many([Request([1], config, 0), Request(system + [1], config, 1), Request([2], config, 2)], 3))
    done = [e.summary for _, e in engine.run_many([Request(system + [9, 9], config, 0)], 1) if isinstance(e, DoneEvent)]
    assert done[0].reused_tokens == len(system)


def test_exact_mode_keeps_every_decode_within_its_row_limit():
    target = FakeContext(counting_rule(), n_seq_max=8)
    target.exact = True
    engine = Engine(target, {"suffix": SuffixDrafter()})  # drafts are free
    # Before any step is timed, auto trusts the generic prior (batching pays); exact mode caps it.
    assert engine.parallelism(8) == 7 and engine.parallelism("auto") == 7
    config = GenerationConfig(drafter="suffix", k=4, max_tokens=12)
    periodic = [[3, 4, 5, 3, 4, 5, 3]] * 5
    list(engine.run_many([Request(p, config, i) for i, p in enumerate(periodic)], parallel=5))
    steps = target.batch_sizes[5:]  # after the five prefills
    assert max(steps) <= 7 and max(steps) > 5  # drafts were made, never past the limit


def test_parallel_with_auto_k_drafts_only_where_the_batch_has_room_for_it():
    """A flat curve (T(n) = T(1) up to 8): drafts are free, every sequence drafts; a linear curve:
    a draft costs as much as another sequence's token, -k auto drafts nothing."""
    for curve, drafts in ((lambda n: 1.0 if n <= 8 else None, True), (lambda n: float(n), False)):
        engine = costed_engine(2, curve, lambda costs: {"suffix": SuffixDrafter()})
        config = GenerationConfig(drafter="suffix", k="auto", max_tokens=20)
        repetitive = [[1, 2, 3, 1, 2, 3, 1], [4, 5, 6, 4, 5, 6, 4]]
        steps = [e for _, e in engine.run_many([Request(p, config, i) for i, p in enumerate(repetitive)], 2)
                 if isinstance(e, StepEvent)]
        assert any(s.drafted for s in steps) == drafts


def test_free_drafts_are_cut_on_the_batch_curve_when_prompts_share_a_decode():
    """Two rows cost one decode, every row beyond a whole one: alone, a draft rides in the free
    second row and is sent; two prompts in a batch fill both rows with their own tokens, and a
    draft row would delay the other prompt's token by as much as it could gain: the planner cuts
    them all. A batch whose rows are free keeps them."""
    two_free = lambda n: 1.0 if n <= 2 else float(n - 1) if n <= 64 else None  # noqa: E731
    periodic = [[3, 4, 5, 3, 4, 5, 3], [6, 7, 8, 6, 7, 8, 6]]
    config = GenerationConfig(drafter="suffix", k="auto", max_tokens=12)

    def drafted(curve, prompts):
        engine = costed_engine(2, curve, lambda costs: {"suffix": SuffixDrafter()})
        steps = [e for _, e in engine.run_many([Request(p, config, i) for i, p in enumerate(prompts)], 2)
                 if isinstance(e, StepEvent)]
        return sum(s.drafted for s in steps)
    assert drafted(two_free, periodic) == 0  # two prompts: no draft row pays
    assert drafted(two_free, periodic[:1]) > 0  # alone: a draft in the free row pays
    assert drafted(lambda n: 1.0 if n <= 64 else None, periodic) > 0  # a free batch keeps them


# --- the cost model ----------------------------------------------------------------------------

Q4_K_M = [1, 1.54, 2.13, 2.72, 3.31, 4.42, 5.54, 6.65]  # T(n)/T(1) measured here (n = 1..5, 8; 6, 7 interpolated)


def curve_of(points):
    return lambda n: points[n - 1] if 1 <= n <= len(points) else None


def test_parallelism_is_the_n_with_the_most_tokens_per_time():
    assert choose_parallel(curve_of(Q4_K_M), 8) == 5  # 5 / 3.31 = 1.51 beats 4 / 2.72 = 1.47 and 8 / 6.65
    assert choose_parallel(curve_of([1, 2, 3, 4]), 4) == 1  # compute-bound: nothing to gain
    assert choose_parallel(curve_of([1.0] * 16), 8) == 8  # free batches: as many as allowed
    assert choose_parallel(curve_of(Q4_K_M), 3) == 3


def test_one_sequences_plan_is_the_adaptive_k_choice():
    for points in (Q4_K_M, [1, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7], [1.0] * 8):
        for acc in ([0.9] * 6, [0.6] * 6, [0.3] * 6, [0.99, 0.95, 0.2, 0.2, 0.2, 0.2]):
            policy = PositionAcceptance(curve_of(points), 0.1, k_max=6, fast=list(acc), slow=list(acc), seen=[0] * 6)
            plan = choose_lengths([LengthChoice(acc, 0.1, 6)], curve_of(points))
            assert plan == [policy.choose()], (points, acc)


def test_a_plan_drafts_for_the_sequence_that_gains_most_and_respects_caps():
    flat = curve_of([1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0])  # 4 rows cost one; the 5th doubles the step
    sure, unsure = LengthChoice([0.95] * 4, 0.0, 4), LengthChoice([0.1] * 4, 0.0, 4)
    assert choose_lengths([sure, unsure], flat) == [2, 0]  # 3 + 1 rows: the sure one gets the room
    assert choose_lengths([sure, unsure], flat, max_rows=3) == [1, 0]  # exact mode's row limit
    assert choose_lengths([LengthChoice([0.95] * 4, 0.0, 1), unsure], flat) == [1, 1]  # its cap; the 4th row is free
    assert choose_lengths([sure, sure], curve_of([1, 2, 3, 4, 5, 6])) == [0, 0]  # linear: never pays


class FailingContext(FakeContext):
    """A backend whose step decodes fail from the `fail_from`-th on, and whose cache clearing fails once."""

    def __init__(self, *args, fail_from: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.fail_from, self.parts_calls, self.clear_fails = fail_from, 0, 1

    def decode_parts(self, parts):
        self.parts_calls += 1
        if self.parts_calls == self.fail_from:
            raise RuntimeError("the decode broke")
        return super().decode_parts(parts)

    def clear(self, seq=None):
        if seq is not None and self.clear_fails:
            self.clear_fails -= 1
            raise RuntimeError("the cache would not clear")
        return super().clear(seq)


def test_a_failed_slot_whose_release_fails_too_is_freed_and_says_why_on_stderr(capsys):
    # The second failure (clearing the failed slot's cache) used to be swallowed without a word.
    engine = Engine(FailingContext(counting_rule(), n_seq_max=1, fail_from=2))
    config = GenerationConfig(drafter="none", k=0, max_tokens=5)
    first = together(engine, config, [[1, 2]], parallel=1)
    assert isinstance(first[0][1], FailedEvent)
    assert "the cache would not clear" in capsys.readouterr().err
    after = together(engine, config, [[3, 4]], parallel=1)  # the slot was given back
    assert isinstance(after[0][1], DoneEvent) and after[0][0] == [5, 6, 7, 8, 9]
