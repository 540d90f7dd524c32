"""Fewer threads while other processes want the cores (llama/thread_share.py): the arithmetic on
scripted /proc readings, and llama.cpp really decoding with the cap on a tiny model."""

from __future__ import annotations

import subprocess
import sys

from specllama.llama import thread_share
from specllama.llama.backend import C
from specllama.llama.context import DecodeContext
from specllama.llama.model import GGUFModel
from specllama.llama.thread_share import CONFIRM, PERIOD_S, ThreadShare, cores_left
from tests.support.one_line import ENV


def test_what_other_processes_use_leaves_this_many_threads():
    assert cores_left(0.0, 2) == 2
    assert cores_left(0.45, 2) == 2  # a browser tab does not cost a thread
    assert cores_left(0.7, 2) == 1  # a build on one core does
    assert cores_left(1.9, 2) == 1  # never none
    assert cores_left(1.2, 8) == 7


class Machine:
    """Scripted /proc: per period, the ticks every process used and the ticks this one used."""

    def __init__(self, cpus: int = 2, tick: int = 100):
        self.cpus, self.tick, self.t = cpus, tick, 0.0
        self.busy = self.total = self.own = 0
        self.reads = 0

    def period(self, others: float, mine: float) -> None:
        """One PERIOD_S passes: others and this process use that many cores' time."""
        self.t += PERIOD_S
        self.total += self.cpus * self.tick
        self.busy += round((others + mine) * self.tick)
        self.own += round(mine * self.tick)

    def read_all(self):
        self.reads += 1
        return self.busy, self.total

    def share(self) -> ThreadShare:
        return ThreadShare(2, read_all=self.read_all, read_own=lambda: self.own, clock=lambda: self.t, cpus=self.cpus)


def test_the_cap_follows_other_processes_after_they_persist_and_ignores_our_own_threads():
    m = Machine()
    share = m.share()
    said: list[str] = []
    share.say = said.append
    assert share.cap() == 2
    for _ in range(3):  # our own two spinning threads are not "other processes"
        m.period(others=0.05, mine=2.0)
        assert share.cap() == 2
    m.period(others=1.0, mine=1.0)  # a build starts: one period is a burst, not a trend
    assert share.cap() == 2
    for _ in range(CONFIRM - 1):
        m.period(others=1.0, mine=1.0)
    assert share.cap() == 1
    m.period(others=1.0, mine=1.0)
    assert share.cap() == 1 and len(share.changes) == 1
    for _ in range(CONFIRM):  # it ends: the threads come back
        m.period(others=0.0, mine=1.0)
        share.cap()
    assert share.cap() == 2 and [c[1] for c in share.changes] == [1, 2]
    assert said[0] == "decoding with 1 thread(s), not 2: other processes used 1.0 of 2 cores' time" and len(said) == 2


def test_between_periods_a_decode_pays_a_clock_read_only():
    m = Machine()
    share = m.share()
    share.cap()
    reads = m.reads
    for _ in range(100):
        share.cap()
    assert m.reads == reads
    m.period(0.0, 2.0)
    share.cap()
    assert m.reads == reads + 1


def test_without_proc_there_is_no_cap():
    share = ThreadShare(4, read_all=lambda: None, read_own=lambda: None)
    assert not share.enabled and share.cap() == 4


class Capped:
    def __init__(self, n: int):
        self.n = n

    def cap(self) -> int:
        return self.n


def test_a_decode_runs_with_the_cap_and_gets_its_threads_back(tiny_models, monkeypatch):
    ctx = DecodeContext(GGUFModel(tiny_models["a"]), n_ctx=256, n_threads=2)
    try:
        capped = Capped(1)
        monkeypatch.setattr(thread_share, "_share", capped)
        ctx.decode([1, 2, 3])
        assert C.llama_n_threads(ctx._ctx) == 1 and C.llama_n_threads_batch(ctx._ctx) == 1
        capped.n = 2
        ctx.decode([4])
        assert C.llama_n_threads(ctx._ctx) == 2
        capped.n = 8  # never more than the user asked for
        ctx.decode([5])
        assert C.llama_n_threads(ctx._ctx) == 2
    finally:
        ctx.close()


def test_only_the_auto_level_follows_the_machine():
    code = ("from specllama.llama import thread_share, thread_wait; import sys; "
            "thread_wait.configure(sys.argv[1], 2); print(thread_share.current() is not None)")
    clean = {k: v for k, v in ENV.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "SPECLLAMA_THREAD_WAIT",
                                                        "SPECLLAMA_THREAD_WAIT_APPLIED")}
    seen = {level: subprocess.run([sys.executable, "-c", code, level], env=clean, capture_output=True, text=True,
                                  timeout=60).stdout.strip() for level in ("auto", "spin", "sleep")}
    assert seen == {"auto": "True", "spin": "False", "sleep": "False"}
