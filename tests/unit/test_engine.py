"""The step loop against scripted fake models: exactness, origins, rollbacks, stops, statistics."""

from __future__ import annotations

import numpy as np
import pytest

from specllama.decoding.drafters import DraftRequest, ModelDrafter
from specllama.decoding.engine import Engine, GenerationConfig, StepEvent, TokenEvent
from specllama.decoding.sampling import SamplingParams
from specllama.decoding.suffix_drafter import SuffixDrafter
from specllama.errors import ContextOverflowError, SpecllamaError
from tests.support.engines import PROMPT, engine_with, generate
from tests.support.fake_llm import FakeContext, FakeStairsContext, counting_rule, noisy_rule, random_rule


def test_plain_decoding_is_one_target_token_per_step():
    ids, events, s = generate(FakeContext(counting_rule()), k=0, max_tokens=10)
    assert ids == [8, 9, 10, 11, 12, 13, 14, 15, 16, 17]
    assert {e.origin for e in events} == {"target"} and s.steps == 10 and s.drafted == 0
    assert "".join(e.text for e in events) == "".join(f"<{t}>" for t in ids) == s.text


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_greedy_speculation_gives_the_targets_own_text(k):
    plain, _, _ = generate(FakeContext(noisy_rule(1)), k=0, max_tokens=40)
    draft = ModelDrafter(FakeContext(counting_rule()))
    spec, _, s = generate(FakeContext(noisy_rule(1)), draft, k=k, max_tokens=40)
    assert spec == plain
    assert 0 < s.accepted < s.drafted  # the draft is right only some of the time


def test_a_perfect_draft_is_all_accepted_with_a_bonus_token_each_step():
    target = FakeContext(counting_rule())
    ids, events, s = generate(target, ModelDrafter(FakeContext(counting_rule())), k=3, max_tokens=12)
    assert [e.origin for e in events] == ["draft", "draft", "draft", "bonus"] * 3
    assert s.steps == 3 and s.acceptance == 1.0 and s.mean_accepted == 4.0 and s.per_position == [1, 1, 1]
    assert target.decoded == len(PROMPT) - 1 + 3 * 4  # each step decodes [last] + 3 drafts once


def test_rejected_drafts_are_rolled_back_from_both_caches():
    target_rule = noisy_rule(2, flip_every=2)
    target, draft_ctx = FakeContext(target_rule), FakeContext(counting_rule())
    ids, events, s = generate(target, ModelDrafter(draft_ctx), k=4, max_tokens=20)
    committed = PROMPT + ids
    # The target holds exactly the committed sequence minus the last (undecoded) token...
    assert target.tokens == committed[:len(target.tokens)] and len(target.tokens) >= len(committed) - 1 - 4
    assert "target" in {e.origin for e in events}
    # ...and the draft's cache was extended, never rebuilt from scratch: far fewer tokens decoded
    # than a re-decode of the whole sequence at every step would cost.
    assert draft_ctx.decoded < s.steps * 4 + len(committed)


def test_max_tokens_is_exact_even_mid_acceptance():
    ids, _, s = generate(FakeContext(counting_rule()), ModelDrafter(FakeContext(counting_rule())), k=4, max_tokens=7)
    assert len(ids) == 7 and s.finish_reason == "length"


def test_end_of_generation_stops_without_printing_it():
    ids, events, s = generate(FakeContext(counting_rule(end_after=9)), ModelDrafter(FakeContext(counting_rule())),
                              k=4, max_tokens=50)
    assert ids == [8, 9, 10, 11, 12, 13] and s.finish_reason == "stop" and "<0>" not in s.text


def test_stop_string_is_not_shown_even_in_pieces():
    ids, events, s = generate(FakeContext(counting_rule()), k=0, max_tokens=50, stop=("<11><1",))
    assert s.finish_reason == "stop_string"
    assert s.text == "<8><9><10>" and "".join(e.text for e in events) == s.text


def test_context_full_ends_the_generation_cleanly():
    target = FakeContext(counting_rule(), n_ctx=12)
    ids, _, s = generate(target, ModelDrafter(FakeContext(counting_rule())), k=4, max_tokens=100)
    assert s.finish_reason == "context" and len(PROMPT) + len(ids) == 13


def test_a_prompt_longer_than_the_context_is_refused():
    with pytest.raises(ContextOverflowError, match="prompt is 3 tokens"):
        generate(FakeContext(counting_rule(), n_ctx=3), k=0)


def test_cancel_stops_after_the_current_step():
    engine = Engine(FakeContext(counting_rule()))
    generation = engine.generate(PROMPT, GenerationConfig(drafter="none", max_tokens=100))
    gen = iter(generation)
    seen = [next(gen), next(gen)]
    generation.cancel()
    rest = list(gen)
    assert isinstance(seen[0], TokenEvent) and isinstance(seen[1], StepEvent)
    assert len(rest) == 1 and rest[0].summary.finish_reason == "cancelled" and rest[0].summary.tokens == 1


def test_a_generation_cancelled_before_it_starts_decodes_nothing():
    """A cancel that arrives before the engine runs is not lost (the chat used to send it twice,
    because starting a generation cleared the engine's flag)."""
    target = FakeContext(counting_rule())
    generation = Engine(target).generate(PROMPT, GenerationConfig(drafter="none", max_tokens=100))
    generation.cancel()
    events = list(generation)
    assert len(events) == 1 and events[0].summary.finish_reason == "cancelled" and events[0].summary.tokens == 0
    assert target.decoded == 0


def test_a_long_prefill_stops_at_the_next_chunk_once_cancelled():
    """A server's client that leaves during a long prompt: the prefill goes on to the end of the
    current n_batch chunk only, and the request ends "cancelled" without a step."""
    target = FakeContext(counting_rule(), n_ctx=4096)
    target.n_batch = 64
    prompt = [3 + (i % 40) for i in range(300)]
    generation = Engine(target).generate(prompt, GenerationConfig(drafter="none", max_tokens=100))
    decode = target.decode

    def decode_then_leave(tokens, logits="last", seq=0):
        generation.cancel()  # the client leaves while the first chunk is decoded
        return decode(tokens, logits, seq)

    target.decode = decode_then_leave
    events = list(generation)
    assert target.decoded == 64 and len(events) == 1
    assert events[0].summary.finish_reason == "cancelled" and events[0].summary.tokens == 0


def test_no_row_verifies_a_draft_past_its_end_of_generation():
    """A draft's token after an end of generation can never be emitted: the draft is cut there."""
    target = FakeContext(counting_rule(end_after=9))
    ids, _, s = generate(target, ModelDrafter(FakeContext(counting_rule(end_after=9))), k=4, max_tokens=50)
    assert ids == [8, 9, 10, 11, 12, 13] and s.finish_reason == "stop"
    # step 1 verifies [7] + 8 9 10 11 (all taken, 12 the bonus); step 2 drafts 13 <end> <end> <end>, sent as 13 <end>
    assert s.steps == 2 and target.decoded == len(PROMPT) - 1 + 5 + 3


def test_the_suffix_drafter_drafts_what_followed_the_same_ngram():
    drafter = SuffixDrafter()
    seq = [1, 2, 3, 4, 9, 9, 1, 2]
    config = GenerationConfig(drafter="lookup", k=3)  # the old name of the suffix drafter

    def ask(committed, k, slot=0):
        return list(drafter.propose([DraftRequest(slot, committed, k, config, None)])[0].tokens)

    assert ask(seq, 3) == [3, 4, 9]
    seq += [3]  # incremental: the index follows the growing sequence
    assert ask(seq, 2) == [4, 9]
    assert ask([1, 2], 3, slot=1) == []  # another sequence has an index of its own
    assert ask([7, 8], 3) == []  # diverged: re-indexed, no match


def test_suffix_drafter_speeds_up_a_repetitive_target_without_changing_it():
    period = lambda toks: np.eye(32, dtype=np.float32)[[3, 4, 5, 6][(len(toks)) % 4]] * 5  # noqa: E731
    plain, _, p = generate(FakeContext(period), k=0, max_tokens=24)
    spec, _, s = generate(FakeContext(period), SuffixDrafter(), k=4, max_tokens=24)
    assert spec == plain and s.steps < p.steps / 2


def test_sampling_is_reproducible_with_a_seed_and_varies_without():
    def sampled(seed):
        draft = ModelDrafter(FakeContext(random_rule(7)))
        ids, _, s = generate(FakeContext(random_rule(3)), draft, k=3, max_tokens=30,
                             sampling=SamplingParams(temperature=1.0, seed=seed))
        return ids, s
    a, s = sampled(11)
    assert a == sampled(11)[0] and a != sampled(12)[0]
    assert 0 < s.accepted < s.drafted


def test_step_statistics_add_up():
    engine = engine_with(FakeContext(noisy_rule(3)), ModelDrafter(FakeContext(counting_rule())))
    generation = engine.generate(PROMPT, GenerationConfig(drafter="model", k=4, max_tokens=30))
    with pytest.raises(RuntimeError, match="not finished"):
        generation.summary
    events = list(generation)
    s = generation.summary
    steps = [e for e in events if isinstance(e, StepEvent)]
    ids = [e.id for e in events if isinstance(e, TokenEvent)]
    assert s.tokens == len(ids) == 30
    assert sum(e.accepted for e in steps) == s.accepted and sum(e.drafted for e in steps) == s.drafted
    assert sum(s.drafted_at) == s.drafted and sum(s.accepted_at) == s.accepted
    assert s.t_python > 0 and s.t_verify > 0 and s.tokens_per_s > 0


@pytest.mark.parametrize("k", [1, 3, 6])
def test_both_verifiers_give_the_same_text_at_their_own_cost(k):
    """The verifier interface: causal and stairs accept the same drafts; stairs decodes
    (K+1)(K+2)/2 tokens a step where causal decodes K+1."""
    runs = {}
    for verify in ("causal", "stairs"):
        target = FakeStairsContext(noisy_rule(4))
        ids, _, s = generate(target, ModelDrafter(FakeContext(counting_rule())), k=k, max_tokens=30, verify=verify)
        runs[verify] = (ids, s, target.decoded - (len(PROMPT) - 1))
    (causal_ids, causal, causal_cost), (stairs_ids, stairs, stairs_cost) = runs["causal"], runs["stairs"]
    assert causal_ids == stairs_ids and causal.accepted == stairs.accepted and causal.steps == stairs.steps
    assert causal_cost == sum(1 + d for d in _drafted_per_step(causal))
    assert stairs_cost == sum((d + 1) * (d + 2) // 2 for d in _drafted_per_step(stairs))


def _drafted_per_step(s) -> list[int]:
    # Per-position counts: drafted_at[i] steps drafted at least i+1 tokens.
    return [sum(1 for n in s.drafted_at if n > step) for step in range(s.steps)]


def test_stairs_refuses_a_context_without_sequences_to_spare():
    engine = engine_with(FakeContext(counting_rule()), ModelDrafter(FakeContext(counting_rule())))
    with pytest.raises(SpecllamaError, match="several sequences"):
        engine.generate(PROMPT, GenerationConfig(drafter="model", k=2, verify="stairs"))


def test_a_request_naming_a_drafter_that_is_not_loaded_is_refused():
    with pytest.raises(SpecllamaError, match="model drafter is not available.*no draft model"):
        Engine(FakeContext(counting_rule())).generate(PROMPT, GenerationConfig(drafter="model", k=2))
