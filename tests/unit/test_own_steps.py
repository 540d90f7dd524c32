"""Drafting's own net in a benchmark run: each drafting step priced on the run's own plain steps."""

import pytest

from specllama.bench.own_steps import OwnSteps
from specllama.decoding.events import StepEvent


def _step(seconds: float, drafted: int = 0, accepted: int = 0, asking: float = 0.0) -> StepEvent:
    # The engine's split of a step's time: asking, the decode, the Python around them.
    return StepEvent(k=drafted, drafted=drafted, accepted=accepted, t_draft=asking, t_verify=0.9 * (seconds - asking),
                     t_python=0.1 * (seconds - asking))


def _run(scale: float, plain: list[float], drafting: list[tuple[float, int, int]], asking: float = 0.0) -> OwnSteps:
    steps = OwnSteps()
    for s in plain:
        steps.add(_step(s * scale + asking, asking=asking))
    for s, drafted, accepted in drafting:
        steps.add(_step(s * scale, drafted, accepted))
    return steps


def test_a_drafting_step_costs_its_excess_over_the_runs_plain_step_and_saves_one_per_accepted_draft():
    # Plain steps of 80 ms (one slow outlier at 120 does not move the median); a 3-draft step of 140 ms
    # that kept 2 drafts: cost 60 ms, saved 160 ms; a 1-draft step of 120 ms that kept none: cost 40 ms.
    steps = _run(1.0, [0.08, 0.08, 0.08, 0.12, 0.08], [(0.14, 3, 2), (0.12, 1, 0)])
    total = 0.08 * 4 + 0.12 + 0.14 + 0.12
    assert steps.net_share() == pytest.approx((0.16 - 0.06 - 0.04) / total)


def test_the_net_is_the_same_on_a_machine_that_runs_the_whole_run_slower():
    # The point of pricing on the run's own steps: the drift between runs cancels out.
    plain, drafting = [0.08] * 20, [(0.15, 3, 1), (0.2, 7, 0), (0.11, 2, 2)]
    # cost 0.07 + 0.12 + 0.03 s, saved (1 + 0 + 2) x 0.08 s
    expected = (0.24 - 0.22) / (20 * 0.08 + 0.15 + 0.2 + 0.11)
    assert _run(1.0, plain, drafting).net_share() == pytest.approx(expected)
    assert _run(1.4, plain, drafting).net_share() == pytest.approx(expected)


def test_a_run_without_drafts_nets_zero_and_one_without_a_plain_step_cannot_be_priced():
    assert _run(1.0, [0.08, 0.09], []).net_share() == 0.0
    assert _run(1.0, [], [(0.1, 2, 2)]).net_share() is None
    assert OwnSteps().net_share() is None


def test_asking_on_steps_that_send_nothing_is_drafting_s_cost():
    # A GPU-like run: 2 ms steps, 0.1 ms asking the suffix drafter on each, one draft of 3 kept whole
    # in a 2.5 ms step. Plain decoding's token is the 2 ms step without the asking.
    steps = _run(1.0, [0.002] * 50, [(0.0025, 3, 3)], asking=0.0001)
    total = 50 * 0.0021 + 0.0025
    assert steps.net_share() == pytest.approx((3 * 0.002 - 0.0005 - 50 * 0.0001) / total)
    assert _run(1.0, [0.002] * 50, [], asking=0.0001).net_share() == pytest.approx(-50 * 0.0001 / (50 * 0.0021))


def test_the_plain_steps_right_after_a_draft_are_its_cost_where_they_run_slow():
    # The H100's shape (cost/online.py): a 2-row verify step 2.6 plain steps, the two plain steps
    # after it 1.9 each while llama.cpp records its graph again. A one-token guess kept (saved 1)
    # then costs 1.6 + 0.9 + 0.9 plain steps: a loss the drafting step's own excess alone would hide.
    steps = OwnSteps()
    for _ in range(10):
        steps.add(_step(0.002))
    for _ in range(3):
        steps.add(_step(0.0052, 1, 1))
        steps.add(_step(0.0038))
        steps.add(_step(0.0038))
        for _ in range(5):
            steps.add(_step(0.002))
    total = 25 * 0.002 + 3 * (0.0052 + 2 * 0.0038)
    assert steps.net_share() == pytest.approx(3 * (0.002 - 0.0032 - 2 * 0.0018) / total)
    # On a CPU those steps run like any other: no charge beyond the drafting step's own.
    cpu = OwnSteps()
    for s, d, a in [(0.08, 0, 0)] * 10 + [(0.12, 1, 1), (0.08, 0, 0), (0.08, 0, 0)] + [(0.08, 0, 0)] * 5:
        cpu.add(_step(s, d, a))
    assert cpu.net_share() == pytest.approx((0.08 - 0.04) / (17 * 0.08 + 0.12))
