"""Going back to plain decoding after drafting (decoding/cost/online.py, SWITCH_STEPS): on llama.cpp's
CUDA backend the two plain steps after a batch of another shape run without a warm CUDA graph
(measured on an H100: 1.9 plain steps each, bench/measured/lent-20261127-verify-shapes.md). Their
excess is the draft's cost, not plain decoding's, and a draft that starts a run of drafts is priced
with it; on a CPU, where it is noise around 0, nothing changes."""

from __future__ import annotations

import pytest

from specllama.decoding.cost.online import AFTERMATH_MIN, SWITCH_STEPS, StepCosts
from specllama.decoding.planner import PROBE_EVERY

T1 = 0.002


def h100_like(rows_seq, aftermath: float = 0.93, verify: float = 1.2, costs: StepCosts | None = None) -> StepCosts:
    """Steps as the H100 paid them: a plain step T1, or T1 x (1 + aftermath) within SWITCH_STEPS plain
    steps of a drafting step; a drafting step of n rows T1 x (1 + verify x (n - 1))."""
    costs, since = costs or StepCosts(), SWITCH_STEPS
    for rows in rows_seq:
        if rows > 1:
            costs.record_step(rows, T1 * (1 + verify * (rows - 1)))
            since = 0
        else:
            costs.record_step(1, T1 * (1 + aftermath) if since < SWITCH_STEPS else T1)
            since += 1
    return costs


def test_the_plain_steps_after_a_draft_are_its_cost_not_plain_decodings():
    # A draft every 8th step, as on the held-out texts: 2 of 7 plain steps ran slow.
    costs = h100_like(([1] * 7 + [2]) * 12 + [1] * 7)
    assert costs.t1() == pytest.approx(T1)  # the slow ones are left out of T(1)...
    assert costs.switch_ratio() == pytest.approx(2 * 0.93)  # ... and are what going back costs
    assert costs.ratio(2) == pytest.approx(2.2)  # the curve stays the decodes' own (reports, the cost cache)
    # A draft now would start a run: priced with its end.
    assert costs.step_ratio(2) == pytest.approx(2.2 + 2 * 0.93)
    assert costs.step_ratio(1) == 1.0


def test_a_draft_that_continues_a_run_is_priced_without_it():
    costs = h100_like(([1] * 6 + [9] * 6) * 4 + [1] * 6 + [9])  # a copy: drafts in a row
    assert costs.switch_ratio() == pytest.approx(2 * 0.93)
    assert costs.step_ratio(9) == pytest.approx(costs.ratio(9)) == pytest.approx(1 + 1.2 * 8)


def test_without_an_aftermath_every_plain_step_is_T1s():
    # A CPU: no graphs. Drafting every other step, the plain steps between still keep T(1) current.
    costs = h100_like([1, 2] * 30, aftermath=0.0)
    assert costs.t1() == pytest.approx(T1) and costs.step_ratio(2) == pytest.approx(2.2)
    for _ in range(13):  # the machine slows down (another process): followed, nothing charged
        costs.record_step(1, 2 * T1)
        costs.record_step(2, 2 * T1 * 2.2)
    assert costs.t1() == pytest.approx(2 * T1) and costs.switch_ratio() == 0.0


def test_noise_below_the_threshold_is_no_switch_cost():
    small = AFTERMATH_MIN / SWITCH_STEPS * 0.5  # half the threshold over both steps
    costs = h100_like(([1] * 7 + [2]) * 12 + [1] * 7, aftermath=small)
    assert costs.switch_ratio() == 0.0 and costs.step_ratio(2) == pytest.approx(2.2)
    assert len(costs.target[1]) == min(12 * 7 + 7, costs.window)  # every plain step a T(1) sample


def test_a_charged_plain_step_answers_the_planners_probe():
    # Drafting every step but the probes: a probe right after a draft is charged, and must not make the
    # planner probe again and again until a steady plain step comes (a long copy's steps lost).
    costs = h100_like([1] * 4 + [2] + [1] * 3 + [9] * (PROBE_EVERY + 1))
    assert costs.switch_ratio() == pytest.approx(2 * 0.93)
    plain = len(costs.target[1])
    h100_like([1], costs=costs)
    assert len(costs.target[1]) == plain  # the probe was charged to the draft before it...
    assert costs.steps - costs.last_t1_step == 0  # ... and answered the probe all the same


def test_the_reports_show_what_going_back_costs_and_whether_it_is_priced():
    from specllama.bench.report import cost_curve_line
    from specllama.runtime.stats import step_cost_lines

    gpu = h100_like(([1] * 7 + [2]) * 12 + [1] * 7)
    assert "going back to plain decoding after a draft: +1.86 plain steps beyond T(1) (n=12; priced into a draft " \
           "that starts a run)" in step_cost_lines(gpu)
    assert "+1.86 plain steps (priced into" in cost_curve_line(gpu.as_curve(4), switch=gpu.aftermath_median())
    cpu = h100_like(([1] * 7 + [2]) * 12 + [1] * 7, aftermath=0.0)
    assert "+0.00 plain steps beyond T(1) (n=12; taken as none)" in step_cost_lines(cpu)[-1]
    assert "going back" not in cost_curve_line(cpu.as_curve(4))


def test_the_first_sample_counts_though_a_report_read_the_switch_just_before():
    costs = h100_like([1] * 7 + [2])
    assert costs.switch_ratio() == 0.0  # nothing known of it yet (and remembered until the next sample)
    costs.record_step(1, T1 * 1.93)
    costs.record_step(1, T1 * 1.92)
    assert costs.switch_ratio() == 0.0  # measured against the steady step after them: not yet come
    costs.record_step(1, T1)
    assert costs.switch_ratio() == pytest.approx(0.93 + 0.92)


def test_a_machine_that_slowed_down_since_T1_was_timed_is_no_switch_cost():
    # A 2-core machine whose plain steps went from T1 to 1.5 x T1 (another process), no aftermath at all:
    # against the T(1) of before, the plain steps after each draft looked 0.5 plain steps slow each.
    costs = h100_like([1] * 8, aftermath=0.0)
    for _ in range(12):
        for rows in (2, 1, 1, 1):
            costs.record_step(rows, 1.5 * T1 * (1 + 1.2 * (rows - 1)))
            assert costs.switch_ratio() == 0.0
    assert costs.t1() == pytest.approx(1.5 * T1)
    # Drafting every other step leaves no steady plain step to measure against: nothing is sampled.
    costs = h100_like([1, 2] * 30)
    assert costs.aftermath_median() is None and costs.switch_ratio() == 0.0


def test_the_switch_cost_is_the_next_runs_prior(tmp_path, monkeypatch):
    from specllama.decoding.cost.online import prior_from_snapshot
    from specllama.runtime import cost_store

    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path))
    key = {"target": "t", "learned": 1}
    cost_store.save_learned(key, h100_like(([1] * 7 + [2]) * 12 + [1] * 7).snapshot())
    nxt = StepCosts(prior_from_snapshot(cost_store.load_learned(key)))
    nxt.record_step(1, T1)
    assert nxt.step_ratio(2) == pytest.approx(nxt.ratio(2) + 2 * 0.93)  # before this run's first draft
    plain = StepCosts()  # a run that drafted nothing keeps what an earlier one measured
    for _ in range(4):
        plain.record_step(1, T1)
    cost_store.save_learned(key, plain.snapshot())
    assert cost_store.load_learned(key)["switch_ratio"] == pytest.approx(2 * 0.93)
    raw = cost_store.entry_path(key).read_text()
    assert '"switch_ratio": 1.86' in raw
    cost_store.entry_path(key).write_text(raw.replace('"switch_ratio": 1.86', '"switch_ratio": "lots"'))  # damaged: not trusted
    assert cost_store.load_learned(key) is None


def test_a_draft_models_record_built_at_load_prices_the_switch_learnt_later():
    from specllama.runtime.loaded import model_acceptance

    costs = StepCosts()
    record = model_acceptance(costs)  # at load: nothing known of the switch
    h100_like(([1] * 7 + [2]) * 12 + [1] * 7, costs=costs)
    assert record.verify_ratio(2) == costs.step_ratio(2) == pytest.approx(costs.ratio(2) + 2 * 0.93)
