"""The benchmark loop: every configuration on every prompt, interleaved, from a cold cache each time.

Fairness on a noisy shared machine comes from the order: within each prompt and repeat the
configurations run back to back (round robin), and the starting configuration rotates from one
prompt to the next, so a slow minute lands on all configurations alike and none always runs first.
Each run clears the target's cache and the drafter's state, so no configuration gets a prompt
already decoded by another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from specllama.bench.configs import BenchConfig
from specllama.bench.own_steps import OwnSteps
from specllama.decoding.engine import Summary
from specllama.decoding.events import StepEvent, TokenEvent
from specllama.decoding.sampling import SamplingParams
from specllama.errors import SpecllamaError
from specllama.llama.machine import current_rss_bytes
from specllama.runtime.session import Session

WARMUP_TOKENS = 8


@dataclass(frozen=True)
class BenchPrompt:
    id: str | int
    tokens: list[int]


@dataclass
class RunRecord:
    config: BenchConfig
    prompt_id: str | int
    repeat: int
    summary: Summary
    token_ids: list[int] = field(repr=False)  # what was generated, for the identical-output check
    rss_bytes: int | None = None
    drafting_net: float | None = None  # drafting's own gain or loss, priced on this run's plain steps (own_steps.py)
    # per token, the run's step seconds through the step that emitted it (shared_text.py)
    token_seconds: list[float] = field(default_factory=list, repr=False)


# (runs done, runs in total, what is running now, the record just finished or None)
ProgressCallback = Callable[[int, int, str, "RunRecord | None"], None]


class BenchRunner:
    def __init__(self, runtime: Session, prompts: Sequence[BenchPrompt], configs: Sequence[BenchConfig], *,
                 max_tokens: int, sampling: SamplingParams, repeat: int = 1,
                 progress: ProgressCallback | None = None):
        self.runtime = runtime
        self.prompts = list(prompts)
        self.configs = list(configs)
        self.max_tokens = max_tokens
        self.sampling = sampling
        self.repeat = repeat
        self.progress = progress or (lambda *a: None)
        self.failed: dict[str, str] = {}  # config label -> why it was dropped

    def run_once(self, config: BenchConfig, prompt: Sequence[int],
                 max_tokens: int) -> tuple[Summary, list[int], OwnSteps, list[float]]:
        """One run: its summary, token ids, steps, and per token the step seconds through the step that
        emitted it (a step's tokens come before its StepEvent)."""
        rt = self.runtime
        rt.reset()  # every run starts from empty caches: none inherits another's decoded prompt
        request = config.generation(max_tokens, self.sampling)
        ids, steps, seconds, clock = [], OwnSteps(), [], 0.0
        try:
            generation = rt.generate(prompt, request)
            for event in generation:
                if isinstance(event, TokenEvent):
                    ids.append(event.id)
                elif isinstance(event, StepEvent):
                    steps.add(event)
                    clock += event.seconds  # the step's own time, as OwnSteps counts it
                    seconds += [clock] * (len(ids) - len(seconds))
            summary = generation.summary
        finally:
            rt.reset()  # a failed run must not leave half a sequence for the next one
        return summary, ids, steps, seconds

    def _attempt(self, config: BenchConfig, prompt: Sequence[int], max_tokens: int):
        """One run, or None when the configuration cannot run here (e.g. a verification mode the
        engine lacks): it is reported as failed and the benchmark goes on without it."""
        try:
            return self.run_once(config, prompt, max_tokens)
        except (SpecllamaError, NotImplementedError) as e:
            self.failed[config.label] = f"{type(e).__name__}: {e}"
            return None

    def warm_up(self) -> None:
        """A few tokens per configuration first: page in the weights, size the buffers, let the
        CPU clocks settle, so the first measured run is not the slow one."""
        for config in self.configs:
            self.progress(0, self.total_runs, f"warm-up {config.label}", None)
            self._attempt(config, self.prompts[0].tokens, min(WARMUP_TOKENS, self.max_tokens))

    @property
    def total_runs(self) -> int:
        return self.repeat * len(self.prompts) * len(self.configs)

    def run(self) -> list[RunRecord]:
        records: list[RunRecord] = []
        done = 0
        n = len(self.configs)
        for repeat in range(self.repeat):
            for index, prompt in enumerate(self.prompts):
                shift = (index + repeat) % n
                for config in self.configs[shift:] + self.configs[:shift]:
                    if config.label in self.failed:
                        done += 1
                        continue
                    self.progress(done, self.total_runs, f"{config.label} on {prompt.id}", None)
                    outcome = self._attempt(config, prompt.tokens, self.max_tokens)
                    done += 1
                    record = None
                    if outcome is not None:
                        summary, ids, steps, seconds = outcome
                        record = RunRecord(config, prompt.id, repeat, summary, ids, current_rss_bytes(),
                                           None if config.is_baseline else steps.net_share(), seconds)
                        records.append(record)
                    self.progress(done, self.total_runs, f"{config.label} on {prompt.id}", record)
        # A configuration that failed part-way is dropped whole: half its prompts would skew its means.
        return [r for r in records if r.config.label not in self.failed]
