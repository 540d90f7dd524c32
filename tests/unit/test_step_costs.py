"""What steps cost, learnt from the engine's own steps (decoding/cost/online.py): robust to
outliers, following drift, estimating row counts never seen, kept between runs."""

from __future__ import annotations

import pytest

from specllama.decoding.cost.online import WINDOW, Prior, StepCosts, generic_ratio, prior_from_snapshot
from specllama.runtime import cost_store as cost_cache


def fed(costs: StepCosts, seconds_for_rows, rows_seq) -> StepCosts:
    for rows in rows_seq:
        costs.record_step(rows, seconds_for_rows(rows))
    return costs


def test_before_any_step_the_prior_prices_every_batch():
    assert StepCosts().ratio(4) == generic_ratio(4) and StepCosts().t1() is None
    steep = Prior(lambda n: float(n), t1_s=0.05)
    # A bare benchmark's steep curve is taken no steeper than the generic shape until a batch is timed.
    assert StepCosts(steep).ratio(3) == generic_ratio(3) and StepCosts(steep).t1() == 0.05
    flat = Prior(lambda n: 1.0, t1_s=0.05)
    assert StepCosts(flat).ratio(3) == 1.0


def test_observed_costs_override_a_lying_prior_within_two_samples():
    flat_prior = Prior(lambda n: 1.0, t1_s=0.05)  # a bare benchmark that saw batches as free
    costs = fed(StepCosts(flat_prior), lambda rows: 0.05 * rows, [1, 1, 1, 4])
    assert 1.0 < costs.ratio(4) < 4.0  # one sample: halfway to the truth
    fed(costs, lambda rows: 0.05 * rows, [4])
    assert costs.ratio(4) == pytest.approx(4.0)
    # Unseen counts follow what was seen: interpolated below, extrapolated above.
    assert costs.ratio(2) == pytest.approx(2.0) and costs.ratio(8) == pytest.approx(8.0)


def test_a_pessimistic_prior_cannot_stop_the_first_batches():
    steep = Prior(lambda n: float(n), t1_s=0.05)  # measured on a busy machine
    costs = fed(StepCosts(steep), lambda rows: 0.05, [1, 1, 1])
    assert costs.ratio(2) == pytest.approx(generic_ratio(2))  # optimistic until a batch is timed
    fed(costs, lambda rows: 0.05 + 0.001 * rows, [2, 2])
    assert costs.ratio(2) < 1.05 and costs.ratio(6) < 1.25  # flat, as timed


def test_outliers_do_not_move_the_estimate():
    costs = fed(StepCosts(), lambda rows: 0.05 * (1 + 0.5 * (rows - 1)), [1, 3] * 12)
    before = costs.ratio(3)
    for _ in range(5):  # a hiccup: another process took the cores for a few steps
        costs.record_step(1, 2.0)
        costs.record_step(3, 5.0)
    assert costs.ratio(3) == pytest.approx(before) and costs.t1() == pytest.approx(0.05)


def test_drift_is_followed_within_a_window():
    costs = fed(StepCosts(), lambda rows: 0.05 * rows, [1, 2] * WINDOW)
    fed(costs, lambda rows: 0.1 * (1 + 0.2 * (rows - 1)), [1, 2] * WINDOW)  # throttled, and memory-bound now
    assert costs.t1() == pytest.approx(0.1) and costs.ratio(2) == pytest.approx(1.2)


def test_a_batch_is_priced_against_the_plain_steps_of_its_moment():
    """A shared machine's speed drifts by a fifth within minutes; batches timed in a slow spell and
    plain steps timed later in a fast one must not make a batch look dear (a benchmark learnt
    T(2)/T(1) = 1.92 that way, where side by side it cost 1.4-1.5)."""
    costs = fed(StepCosts(), lambda rows: 0.13 * (1 + 0.5 * (rows - 1)), ([1] * 9 + [2]) * 6)  # a slow spell
    fed(costs, lambda rows: 0.10, [1] * WINDOW)  # then only plain steps, in a fast one
    assert costs.t1() == pytest.approx(0.10) and costs.ratio(2) == pytest.approx(1.5)
    assert costs.seconds(2) == pytest.approx(0.15)  # what a batch costs now


def test_the_draft_cost_is_relative_to_a_plain_step():
    costs = fed(StepCosts(Prior(draft_ratio=0.44)), lambda rows: 0.02, [1] * 5)
    assert costs.draft_ratio() == 0.44  # believed until observed
    costs.record_draft(4, 4 * 0.03)
    assert costs.draft_ratio() == pytest.approx(1.5)  # a GPU's loop: the draft dearer than the target's step


def test_nonsense_samples_are_ignored():
    costs = StepCosts()
    costs.record_step(0, 1.0)
    costs.record_step(2, 0.0)
    costs.record_step(2, float("nan"))
    costs.record_draft(0, 1.0)
    assert costs.steps == 0 and not costs.target and not costs.draft


def test_what_a_run_learnt_is_the_next_runs_prior(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path))
    costs = fed(StepCosts(), lambda rows: 0.04 * (1 + 0.6 * (rows - 1)), [1, 2, 4] * 4)
    costs.record_draft(2, 0.05)
    key = {"target": "t", "learned": 1}
    draft = tmp_path / "draft.gguf"
    draft.write_bytes(b"x")
    cost_cache.save_learned(key, costs.snapshot(), draft)
    raw = cost_cache.load_learned(key, draft)
    assert raw["draft_ratio"] == pytest.approx(0.625) and cost_cache.load_learned(key, None)["draft_ratio"] is None
    prior = prior_from_snapshot(raw)
    assert prior.learned and prior.t1_s == pytest.approx(0.04)
    assert prior.ratio(4) == pytest.approx(2.8) and prior.ratio(3) == pytest.approx((1.6 + 2.8) / 2)
    nxt = StepCosts(prior)
    assert nxt.ratio(4) == pytest.approx(2.8)  # trusted before this run times a batch
    # A later run that timed only plain steps (--no-draft) keeps what this one learnt of batches.
    plain = fed(StepCosts(prior), lambda rows: 0.05, [1] * 4)
    cost_cache.save_learned(key, plain.snapshot(), None)
    again = cost_cache.load_learned(key, None)
    assert again["t1_s"] == pytest.approx(0.05) and float(again["ratios"]["4"]) == pytest.approx(2.8)
    # A learnt entry that is not what save_learned writes is ignored, never trusted.
    for bad in ('{"key": 1}', "not json", '{"key": {"target": "t", "learned": 1}, "learned": {"t1_s": -1}}'):
        cost_cache.entry_path(key).write_text(bad)
        assert cost_cache.load_learned(key) is None


def test_a_curve_timed_on_a_busy_machine_is_neither_trusted_nor_cached(tmp_path, monkeypatch):
    from specllama.decoding.cost.curve import CostCurve
    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path))
    key = {"k": 1, "max_n": 4}
    busy = CostCurve(0.098, [1.0, 2.0, 4.62, 4.0], None, 256, 3)  # T(3) > 1.25 x 3 one-row decodes
    cost_cache.save(key, busy)
    assert cost_cache.load_cached(key) is None
    good = CostCurve(0.05, [1.0, 1.5, 2.1, 2.4], None, 256, 3)
    cost_cache.save(key, good)
    assert cost_cache.load_cached(key) == good


def test_a_rarely_seen_row_count_forgets_a_bad_first_impression():
    """A warm-up's slow first decodes priced 2-row steps out; nothing drafted, so nothing timed
    them again. A few old samples expire and the estimate turns optimistic, so one is tried."""
    from specllama.decoding.cost.online import STALE_STEPS

    costs = fed(StepCosts(), lambda rows: 0.05, [1] * 5)
    costs.record_step(2, 0.09)  # a page-faulting first batch: 1.8x
    costs.record_step(2, 0.09)
    assert costs.ratio(2) == pytest.approx(1.8)
    fed(costs, lambda rows: 0.05, [1] * STALE_STEPS)
    assert costs.ratio(2) == pytest.approx(1.8)  # not yet
    fed(costs, lambda rows: 0.05, [1])
    assert costs.ratio(2) == pytest.approx(generic_ratio(2))  # forgotten: tried again
    well_known = fed(StepCosts(), lambda rows: 0.05 * (1 + 0.8 * (rows - 1)), [1, 2] * 4 + [1] * (STALE_STEPS + 5))
    assert well_known.ratio(2) == pytest.approx(1.8)  # many samples stand


def test_an_mtp_heads_draft_cost_is_learnt_and_shown_apart_from_the_draft_models():
    """Each decoding source is priced on its own decodes (policy/source_choice.py weighs them
    apart); before the head's first draft its cost is the prior's guess, never the model's."""
    from specllama.decoding.cost.online import SOURCE_PRIOR_RATIO
    from specllama.runtime.stats import step_cost_lines

    costs = StepCosts(Prior(draft_ratio=0.5))
    costs.record_step(1, 0.010)
    assert costs.draft_ratio("mtp") == SOURCE_PRIOR_RATIO["mtp"] and costs.draft_ratio() == 0.5
    costs.record_draft(2, 0.004, "mtp")
    costs.record_draft(1, 0.006, "model")
    assert costs.draft_ratio("mtp") == pytest.approx(0.2) and costs.draft_ratio() == pytest.approx(0.6)
    lines = step_cost_lines(costs)
    assert any(line.startswith("draft decode 6.0 ms") for line in lines)
    assert any(line.startswith("mtp decode 2.0 ms a draft position (c = 0.20") for line in lines)


def test_a_prompts_chunks_are_timed_on_the_engines_clock():
    """Prompt chunks are timed on the clock the steps are (a fake backend's in tests and in
    scripts/measure/policy_replay.py): on the wall clock a fake prompt looked free, and with it the
    cost model's bound on big batches (one more row: a prompt row), so the replay from an empty cost
    cache priced 64-row drafts at almost nothing."""
    import statistics

    from specllama.decoding.engine import Engine, GenerationConfig
    from tests.support import fake_llm

    clock = fake_llm.FakeClock()
    target = fake_llm.FakeContext(fake_llm.counting_rule(), clock=clock, cost=lambda rows: 0.01 * rows)
    engine = Engine(target, {}, {}, StepCosts(), clock=clock)
    list(engine.generate(list(range(2, 102)), GenerationConfig(drafter="none", max_tokens=3)))
    assert statistics.median(engine.costs.prefill) == pytest.approx(0.01)


def dips_at_blocks(rows: int) -> float:
    """T(n) in seconds with llama.cpp's CPU shape (bench/measured/vm-20261126-verify-rows-dense): a
    line through the small batches, and whole blocks of 16 rows well below it."""
    line = 0.04 * (1 + 0.5 * (rows - 1))
    return {16: 0.04 * 7.7, 32: 0.04 * 14.7, 64: 0.04 * 20.7}.get(rows, line)


def test_a_block_never_timed_is_tried_once_the_block_below_it_was():
    """Counts between timed ones are interpolated; a block count between two non-block counts would
    be priced on their line (11 and 20 rows timed: 16 at ~8.5 plain steps) and never sent, so never
    found to cost 7.7. Untimed, it is priced as prompt rows would cost, one block beyond what is
    known at a time, and once timed at what it cost."""
    costs = fed(StepCosts(), dips_at_blocks, [1, 11, 20] * 3)
    line = costs._between_observed(16, costs.t1())
    assert line == pytest.approx(1 + 0.5 * 15) and costs.ratio(16) < line - 2  # tried, not priced on the line
    assert costs.ratio(32) > costs.ratio(33) - 1  # the next block waits for this one
    fed(costs, dips_at_blocks, [16, 16])
    assert costs.ratio(16) == pytest.approx(7.7)  # what it cost
    assert costs.ratio(32) < costs._between_observed(32, costs.t1()) - 2  # now the next block is tried
    for prompt_rows in (64, 64):
        costs.record_prefill(prompt_rows, prompt_rows * 0.01)  # a prompt row: a quarter of a plain step
    assert costs.ratio(32) == pytest.approx(1 + 0.25 * 31)
    # What a prior measured is not tried again: a startup curve to 16 rows, or an earlier run's counts.
    known = fed(StepCosts(Prior(lambda n: 1 + 0.5 * (n - 1), 0.04, known=frozenset(range(1, 17)))),
                dips_at_blocks, [1, 11, 20] * 3)
    assert known.ratio(16) == pytest.approx(8.5)


def test_past_a_blocks_dip_rows_are_priced_at_a_prompt_rows_cost():
    """16 rows cost less than 15 (a block's dip): the slope of the largest two counts timed is below
    nothing, and a fresh engine priced 48 rows at 7.5 plain steps where they cost 22.5, and bet a
    47-token draft on it. Past the largest count timed, each row costs what a prompt row does."""
    costs = fed(StepCosts(), dips_at_blocks, [1, 5, 15, 16] * 3)
    for prompt_rows in (64, 64):
        costs.record_prefill(prompt_rows, prompt_rows * 0.01)  # a prompt row: a quarter of a plain step
    assert costs.ratio(48) == pytest.approx(7.7 + 0.25 * 32)
    assert costs.ratio(20) == pytest.approx(7.7 + 0.25 * 4)


def test_a_runs_timed_counts_are_known_to_the_next_run():
    costs = fed(StepCosts(), dips_at_blocks, [1, 4, 16] * 2)
    prior = prior_from_snapshot(costs.snapshot())
    assert prior.known == frozenset({1, 4, 16}) and StepCosts(prior).ratio(16) == pytest.approx(7.7)
