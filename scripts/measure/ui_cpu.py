#!/usr/bin/env python3
"""The chat's own CPU, without a model: the UI thread's CPU time while the fake runtime of the
tests streams a 77-step code answer at 65 ms a step (about this machine's decode speed), headless
(Textual lays out and renders every frame, writes nothing), for several UI budgets (the share of a
core the UI thread may use while an answer streams; "none" paints at the shortest interval
whatever it costs, see specllama/tui/cadence.py), with how many screen updates (compositor passes)
each answer took and the gap between paints the budget led to.
A model-free view of what scripts/measure/tui_overhead.py measures through noise: on two cores,
every second the UI thread spends comes out of llama.cpp's time.

    .venv/bin/python scripts/measure/ui_cpu.py [--rounds 3] [--budgets none,0.05,0.08] [--interval 0.25]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from textual.screen import Screen  # noqa: E402

from specllama.tui import ChatApp, ChatSettings  # noqa: E402
from specllama.tui.app import LIVE_INTERVAL  # noqa: E402
from tests.support.chat_app import FakeRuntime, wait_until  # noqa: E402

ANSWER = ("Here is a function:\n\n```python\ndef is_prime(n: int) -> bool:\n    \"\"\"Tell whether n is prime.\"\"\"\n"
          "    if n < 2:\n        return False\n    for d in range(2, int(n ** 0.5) + 1):\n        if n % d == 0:\n"
          "            return False\n    return True\n```\n\nIt checks divisors up to the square root of n, which is enough.\n")
SCRIPT = [[(ANSWER[i:i + 4], "target")] for i in range(0, len(ANSWER), 4)]  # ~4 characters a token


def ui_cpu(live_interval: float, budget: float | None, flush_interval: float = 0.1) -> tuple[float, int, float]:
    """The UI thread's CPU seconds for one answer, the screen updates it took, the last paint gap."""
    runtime = FakeRuntime(SCRIPT, step_delay=0.065)
    app = ChatApp(lambda progress, status: runtime, ChatSettings(drafter="none"), flush_interval=flush_interval,
                  live_interval=live_interval, ui_budget=budget)
    spent, updates = [], [0]
    count_updates = Screen._compositor_refresh  # a private hook, but this only counts its calls

    def counted(screen):
        updates[0] += 1
        count_updates(screen)
    Screen._compositor_refresh = counted

    async def scenario():
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_until(pilot, lambda: app.runtime is not None)
            start, updates[0] = time.thread_time(), 0
            app.ask("prime?")
            while app.busy:
                await asyncio.sleep(0.05)
            spent.append(time.thread_time() - start)
    try:
        asyncio.run(scenario())
    finally:
        Screen._compositor_refresh = count_updates
    return spent[0], updates[0], app.view.live.gap


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budgets", default="none,0.05,0.08", help="UI budgets (share of a core) or none, comma-separated")
    ap.add_argument("--interval", type=float, default=LIVE_INTERVAL, help="shortest gap between paints, seconds")
    args = ap.parse_args()
    budgets = [None if b == "none" else float(b) for b in args.budgets.split(",")]
    seen: dict[float | None, list[tuple[float, int, float]]] = {b: [] for b in budgets}
    for _ in range(args.rounds):  # interleaved, so a busy moment hurts every budget alike
        for budget in budgets:
            seen[budget].append(ui_cpu(args.interval, budget))
    wall = len(SCRIPT) * 0.065
    for budget, rounds in seen.items():
        median = statistics.median(cpu for cpu, _, _ in rounds)
        name = f"budget {budget:.0%}" if budget is not None else f"every {args.interval:.2f} s"
        print(f"{name:>12}: UI thread CPU median {median:.2f} s over a {wall:.1f} s answer ({median / wall:.1%} of a "
              f"core), {statistics.median(n for _, n, _ in rounds):.0f} screen updates, last gap "
              f"{statistics.median(g for _, _, g in rounds):.2f} s; rounds "
              + ", ".join(f"{cpu:.2f} s/{n}" for cpu, n, _ in rounds))


if __name__ == "__main__":
    main()
