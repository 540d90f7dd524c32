"""The streaming answer's paint cadence (specllama/tui/cadence.py), on fake clocks and a fake timer
owner: when it paints, and how the gap follows the UI thread's CPU share."""

from __future__ import annotations

import asyncio
import os

import pytest

from specllama.tui.cadence import MAX_GAP, Cadence, spare_core


class FakeTimer:
    def __init__(self, wait, callback):
        self.wait, self.callback, self.stopped = wait, callback, False

    def stop(self):
        self.stopped = True


class Owner:
    def __init__(self):
        self.timers: list[FakeTimer] = []

    def set_timer(self, wait, callback):
        self.timers.append(FakeTimer(wait, callback))
        return self.timers[-1]


class Clocks:
    def __init__(self):
        self.wall, self.cpu = 100.0, 5.0

    def spend(self, wall: float, cpu: float) -> None:
        self.wall += wall
        self.cpu += cpu


def make(budget=None, interval=0.25):
    owner, clocks, paints = Owner(), Clocks(), []

    async def paint():
        paints.append(clocks.wall)
    cadence = Cadence(owner, interval, paint, budget, clock=lambda: clocks.wall, cpu_clock=lambda: clocks.cpu)
    return cadence, owner, clocks, paints


def test_paints_at_once_then_at_most_one_timer_for_the_changes_in_between():
    cadence, owner, clocks, paints = make()
    asyncio.run(cadence.changed())
    assert paints == [100.0] and not owner.timers
    clocks.spend(0.1, 0.0)
    asyncio.run(cadence.changed())
    asyncio.run(cadence.changed())
    assert len(owner.timers) == 1 and owner.timers[0].wait == pytest.approx(0.15)
    clocks.spend(0.15, 0.0)
    asyncio.run(owner.timers[0].callback())
    assert paints == [100.0, 100.25]
    clocks.spend(0.3, 0.0)
    asyncio.run(cadence.changed())  # the gap is over: at once again
    assert paints[-1] == pytest.approx(100.55) and len(owner.timers) == 1


def test_gap_grows_with_the_share_of_a_core_used_and_shrinks_back_to_the_interval():
    cadence, owner, clocks, paints = make(budget=0.05)
    asyncio.run(cadence.changed())
    clocks.spend(0.25, 0.025)  # 10 % of a core: twice the budget
    asyncio.run(cadence.changed())
    assert cadence.gap == pytest.approx(0.5)
    clocks.spend(0.5, 0.5)  # a whole core: capped
    asyncio.run(cadence.changed())
    assert cadence.gap == MAX_GAP
    for _ in range(10):  # the UI goes quiet: back to the shortest gap, not below
        clocks.spend(cadence.gap, 0.001)
        asyncio.run(cadence.changed())
    assert cadence.gap == 0.25
    assert len(paints) == 13 and not owner.timers


def test_without_a_budget_the_gap_stays_whatever_the_cost():
    cadence, _, clocks, _ = make(budget=None)
    asyncio.run(cadence.changed())
    clocks.spend(0.25, 0.25)
    asyncio.run(cadence.changed())
    assert cadence.gap == 0.25


def test_cancel_drops_the_pending_paint_keeps_the_gap_and_the_next_change_paints_at_once():
    cadence, owner, clocks, paints = make(budget=0.05)
    asyncio.run(cadence.changed())
    clocks.spend(0.25, 0.025)
    asyncio.run(cadence.changed())
    clocks.spend(0.1, 0.0)
    asyncio.run(cadence.changed())
    assert len(owner.timers) == 1
    cadence.cancel()
    assert owner.timers[0].stopped and cadence.gap == pytest.approx(0.5)
    clocks.spend(0.01, 0.01)
    asyncio.run(cadence.changed())  # a new answer: painted at once, and its first paint measures nothing
    assert len(paints) == 3 and cadence.gap == pytest.approx(0.5)


def test_spare_core_compares_the_cores_this_process_may_use_with_the_threads():
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert spare_core(cores - 1)
    assert not spare_core(cores)
