#!/usr/bin/env python3
"""The chat's own CPU, without a model: the UI thread's CPU time while the fake runtime of the
tests streams a 77-step code answer at 65 ms a step (about this machine's decode speed), headless
(Textual lays out and renders every frame, writes nothing), for several Markdown update intervals.
A model-free view of what scripts/measure_tui_overhead.py measures through noise: on two cores,
every second the UI thread spends comes out of llama.cpp's time.

    .venv/bin/python scripts/measure_ui_cpu.py [--rounds 2] [--intervals 0,0.3,1]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specllama.tui import ChatApp, ChatSettings  # noqa: E402
from specllama.tui.widgets import chat_message  # noqa: E402
from tests.test_tui import FakeRuntime, wait_until  # noqa: E402

ANSWER = ("Here is a function:\n\n```python\ndef is_prime(n: int) -> bool:\n    \"\"\"Tell whether n is prime.\"\"\"\n"
          "    if n < 2:\n        return False\n    for d in range(2, int(n ** 0.5) + 1):\n        if n % d == 0:\n"
          "            return False\n    return True\n```\n\nIt checks divisors up to the square root of n, which is enough.\n")
SCRIPT = [[(ANSWER[i:i + 4], "target")] for i in range(0, len(ANSWER), 4)]  # ~4 characters a token


def ui_cpu(markdown_interval: float, flush_interval: float = 0.1) -> float:
    chat_message.MARKDOWN_INTERVAL = markdown_interval
    runtime = FakeRuntime(SCRIPT, step_delay=0.065)
    app = ChatApp(lambda progress, status: runtime, ChatSettings(drafter="none"), flush_interval=flush_interval)
    spent = []

    async def scenario():
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_until(pilot, lambda: app.runtime is not None)
            start = time.thread_time()
            app.ask("prime?")
            while app.busy:
                await asyncio.sleep(0.05)
            spent.append(time.thread_time() - start)
    asyncio.run(scenario())
    return spent[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--intervals", default="0,0.3,1", help="Markdown update intervals in seconds, comma-separated")
    args = ap.parse_args()
    intervals = [float(x) for x in args.intervals.split(",")]
    seen: dict[float, list[float]] = {i: [] for i in intervals}
    for _ in range(args.rounds):  # interleaved, so a busy moment hurts every interval alike
        for interval in intervals:
            seen[interval].append(ui_cpu(interval))
    wall = len(SCRIPT) * 0.065
    for interval, cpu in seen.items():
        median = statistics.median(cpu)
        print(f"Markdown every {interval:.1f} s: UI thread CPU median {median:.2f} s over a {wall:.1f} s answer "
              f"({median / wall:.0%} of a core); rounds " + ", ".join(f"{c:.2f}" for c in cpu))


if __name__ == "__main__":
    main()
