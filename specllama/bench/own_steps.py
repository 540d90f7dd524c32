"""What drafting itself gained or lost in one benchmark run, priced on that run's own plain steps.

Why: a prompt's tok/s ratio compares two runs made seconds apart, and on a shared machine the same
one-row step can take 71 ms in one run and 91 ms in the next (2-vCPU Xeon VM:
bench/measured/xeon-20261127-plain-step-drift), so over 2-4 repeats a prompt's ratio moves by
+-10 % with no change in the work, and the "worst prompt" mostly names the unluckiest pair. Within
one run, a plain step without the asking (what plain decoding pays a token) is the yardstick: a
drafting step's excess over it is what the step cost, each accepted draft saved one, the plain
steps right after a draft cost their excess too (on a GPU they run slow while llama.cpp records its
CUDA graph again: cost/online.py's switch cost, ~0.9 plain steps each on an H100; on a CPU noise
around 0), and asking a drafter on a step that then sent nothing cost its asking time (on a GPU's
2 ms step a few per cent, paid on every step: policy/realised.py). So

    net = (saved - the drafting steps' excess - that of the 2 steps after each - asking elsewhere) / run time

is drafting's own effect on the prompt, measured, and free of the drift between runs. What it
cannot see is a plain step made slower by the drafting around it (measured: none; the same file,
16 interleaved pairs, median -0.8 ms inside llama_decode) and the policy's other Python on a plain
step (0.07 ms of the 0.23 ms `auto` adds to one there, the rest being the asking counted here).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from specllama.decoding.cost.online import SWITCH_STEPS
from specllama.decoding.events import StepEvent


@dataclass
class OwnSteps:
    plain: list[float] = field(default_factory=list)  # seconds of each step that verified no draft...
    asking: list[float] = field(default_factory=list)  # ... and of that, asking drafters for one
    # (seconds, drafts sent, drafts accepted) of each step that verified drafts
    drafting: list[tuple[float, int, int]] = field(default_factory=list)
    after: list[float] = field(default_factory=list)  # seconds of the SWITCH_STEPS plain steps after each drafting run
    _since_draft: int = field(default=SWITCH_STEPS, repr=False)

    def add(self, step: StepEvent) -> None:
        seconds = step.seconds  # the whole step, asking included
        if step.drafted:
            self.drafting.append((seconds, step.drafted, step.accepted))
            self._since_draft = 0
        elif self._since_draft < SWITCH_STEPS:
            self.after.append(seconds)
            self._since_draft += 1
        else:
            self.plain.append(seconds)
            self.asking.append(step.t_draft)

    @property
    def seconds(self) -> float:
        """The run's steps' time."""
        return sum(self.plain) + sum(self.after) + sum(s for s, _, _ in self.drafting)

    def net_share(self) -> float | None:
        """(saved - cost) / the run's step time; for a run that drafted nothing, minus its asking; None
        where the run had no plain step to price its drafts on (or no time at all)."""
        total = self.seconds
        if total <= 0 or not self.plain:
            return None
        step = statistics.median(s - a for s, a in zip(self.plain, self.asking))  # plain decoding's token
        cost = sum(s - step for s, _, _ in self.drafting) + sum(s - step for s in self.after) + sum(self.asking)
        saved = sum(accepted for _, _, accepted in self.drafting) * step
        return (saved - cost) / total
