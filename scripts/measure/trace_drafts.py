"""One line per drafting step of a real run: what `-k auto` sent, its odds, how much was accepted, and
what the step cost against a plain one, with each prompt's start marked and each time the realised check
benched a source. Any specllama command line follows (bench, run, serve), run in this process with the
step's observer wrapped.

Why: bench's per-prompt "drafting's own net" says a prompt lost to drafting, not which bets lost; this
shows them (bench/measured/vm-20261127-r4-trace-unseen.txt: edit-js-async's two 8-token copies sent at
0.96-0.99 odds that broke on their first token).

    python scripts/measure/trace_drafts.py bench --prompts bench/prompts_unseen.jsonl \
        --configs "none;auto:k=auto" -n 96 --repeat 1 --seed 7 -t 2 2> trace.txt
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specllama.cli.main import main  # noqa: E402


def _threads(argv: list[str]) -> int | None:
    for flag in ("-t", "--threads"):
        if flag in argv[:-1]:
            return int(argv[argv.index(flag) + 1])
    return None


def configure_threads(argv: list[str]) -> None:
    """The threads' wait level the command line asks for, set before anything loads llama.cpp (OpenMP
    reads it once, when it loads: llama/thread_wait.py), as `specllama` itself would."""
    from specllama.llama import thread_wait

    level = argv[argv.index("--thread-wait") + 1] if "--thread-wait" in argv[:-1] else None
    thread_wait.configure(level, _threads(argv))


def wrap_observer() -> None:
    """Print every drafting step; imported here, after the threads' wait level is set: the policy's
    module loads llama.cpp, and OpenMP reads that level once, when it loads (llama/thread_wait.py)."""
    from specllama.decoding.policy.source_choice import SourceChoice

    observe, start, cut, steps = SourceChoice.observe, SourceChoice.start, SourceChoice.cut, [0]
    # What each length cost when the draft was cut, before its own step taught the costs anything: a bet
    # lost on a batch size never timed shows as priced far below what it then cost (T(n)/T(1) after it).
    priced: dict[int, float | None] = {}

    def cutting(self, proposal):
        sent, known = cut(self, proposal)
        priced.clear()
        priced.update((n, self.kit.costs.step_ratio(n)) for n in range(2, len(sent.tokens) + 2))
        return sent, known

    def observing(self, outcome):
        steps[0] += 1
        if outcome.drafted:
            odds = ",".join(f"{c:.2f}" for c in (outcome.sent.confidence or ())[:8])
            price = priced.get(outcome.drafted + 1)
            print(f"step {steps[0]:3d} {outcome.source} sent {outcome.drafted:2d} accepted {outcome.n_accepted:2d} "
                  f"odds [{odds}] {outcome.seconds * 1e3:6.1f} ms, plain step {(outcome.t1 or 0) * 1e3:5.1f} ms, "
                  f"T({outcome.drafted + 1})/T(1) {self.kit.costs.ratio(outcome.drafted + 1):.2f}"
                  f"{f', priced {price:.2f}' if price is not None else ''}: {outcome.text!r}", file=sys.stderr)
        return observe(self, outcome)

    def starting(self, slot, prompt):
        steps[0] = 0
        print(f"--- a prompt of {len(prompt)} tokens", file=sys.stderr)
        return start(self, slot, prompt)

    SourceChoice.observe, SourceChoice.start, SourceChoice.cut = observing, starting, cutting

    # The realised check's verdicts too: a source benched sends nothing for a while, which a gap in the steps
    # above alone does not tell from costs or odds that said no (bench/measured/vm-20261128-r6-replay-fidelity.md).
    from specllama.decoding.realised import RealisedSpeed

    bench = RealisedSpeed._bench

    def benching(self, source, record):
        print(f"benched {source} for {record.pause} steps (realised {record.gain:.2f} of plain over its last "
              f"{record.steps} steps)", file=sys.stderr)
        return bench(self, source, record)

    RealisedSpeed._bench = benching


if __name__ == "__main__":
    argv = sys.argv[1:]
    configure_threads(argv)
    wrap_observer()
    sys.exit(main(argv))
