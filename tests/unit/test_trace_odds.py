"""scripts/measure/trace_odds.py reads trace_drafts.py's lines as they are printed and judges each draft position
the way the calibrator does (the tokens before it right; the first rejected one judged too), so its table of
stated odds against hits says what a real run's sent drafts did."""

from __future__ import annotations

import pytest

from tests.support.measure_scripts import fresh_script

EIGHT = ",".join(["0.95"] * 8)
TRACE = f"""\
--- a prompt of 40 tokens
step   3 suffix sent  2 accepted  2 odds [0.80,0.90]   60.0 ms, plain step  20.0 ms, T(3)/T(1) 2.00: 'ab'
--- a prompt of 50 tokens
step   5 suffix sent  3 accepted  0 odds [0.90,0.90,0.90]   80.0 ms, plain step  20.0 ms, T(4)/T(1) 2.50: 'x'
benched suffix for 16 steps (realised 0.80 of plain over its last 4 steps)
step   9 suffix sent 10 accepted  9 odds [{EIGHT}]  100.0 ms, plain step  20.0 ms, T(11)/T(1) 5.00: 'y'
"""


@pytest.fixture
def trace_odds(monkeypatch):
    yield from fresh_script(monkeypatch, "trace_odds")


def test_reads_drafts_with_their_prompt_and_cost(trace_odds):
    drafts = trace_odds.read(TRACE.splitlines())
    assert [(d.prompt, d.sent, d.accepted) for d in drafts] == [(0, 2, 2), (1, 3, 0), (1, 10, 9)]
    assert drafts[0].cost == pytest.approx(3.0) and drafts[0].ratio == 2.0
    assert drafts[2].odds == (0.95,) * 10  # printed for 8 tokens: the last two taken at the 8th's odds
    assert drafts[0].expected == pytest.approx(1 + 0.8 + 0.8 * 0.9)


def test_positions_are_judged_up_to_the_first_rejection(trace_odds):
    rows = {j: (n, stated, right) for j, n, stated, right in trace_odds.by_position(trace_odds.read(TRACE.splitlines()))}
    # position 1: all three drafts judged, two right; position 2: the first and the third (the second broke at 1)
    assert rows[0] == (3, pytest.approx((0.8 + 0.9 + 0.95) / 3), pytest.approx(2 / 3))
    assert rows[1] == (2, pytest.approx((0.9 + 0.95) / 2), 1.0)
    assert rows[7] == (1, pytest.approx(0.95), 1.0)  # the 10-token draft's 8th token, the last printed position


def test_promise_bins_and_net(trace_odds):
    drafts = trace_odds.read(TRACE.splitlines())
    rows = {label: rest for label, *rest in trace_odds.by_promise(drafts)}
    # the 3-token draft: E = 1 + .9 + .81 + .729 = 3.439 over 2.5 -> 1.38; kept 1 token in 4 plain steps
    n, promised, realised, net = rows["1.3-1.5"]
    assert n == 1 and promised == pytest.approx(3.439 / 2.5) and realised == pytest.approx(0.25) and net == pytest.approx(-3.0)
    assert rows["1.15-1.3"][:2] == [1, pytest.approx(2.52 / 2.0)]  # the 2-token draft: 1 + .8 + .72 over 2 rows' 2.0
    assert rows["1.5-2"][0] == 1  # the 10-token one: 1 + (.95 + ... + .95^10) = 8.62 over 5.0
    assert set(rows) == {"1.15-1.3", "1.3-1.5", "1.5-2"}


def test_net_per_prompt_skips_the_warm_up(trace_odds):
    drafts = trace_odds.read(TRACE.splitlines())
    per = trace_odds.by_prompt([drafts, drafts], ["only"])
    assert per == {"only": (4, 26, pytest.approx(2 * ((1 - 4.0) + (10 - 5.0))))}  # two traces summed
