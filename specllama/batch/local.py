"""Resumable batch generation on this machine: every prompt through the engine, one record each,
appended to the output (batch/output.py) as soon as it is finished."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator, Sequence

from specllama.batch.output import OutputState, OutputWriter, open_output, signals_deferred
from specllama.batch.prompts_file import PromptItem, id_key
from specllama.decoding.engine import DoneEvent, FailedEvent, GenerationConfig, Request, Summary
from specllama.errors import SpecllamaError
from specllama.runtime.session import Session


def make_record(item: PromptItem, summary: Summary) -> dict:
    return {
        "id": item.id,
        "prompt": item.prompt,
        "text": summary.text,
        "tokens": summary.tokens,
        "tokens_per_s": round(summary.tokens_per_s, 3),
        "acceptance": summary.acceptance,
        "mean_accepted": round(summary.mean_accepted, 3),
        "drafted": summary.drafted,  # as batch --server's records, so acceptance compares
        "accepted": summary.accepted,
        # per source (suffix, model): under --drafter auto, where the accepted drafts came from
        "drafted_by": dict(summary.drafted_by),
        "accepted_by": dict(summary.accepted_by),
        "finish_reason": summary.finish_reason,
        "prompt_tokens": summary.prompt_tokens,
        "seconds": round(summary.t_prompt + summary.t_generate, 3),
    }


@dataclass
class BatchReport:
    written: int = 0
    skipped: int = 0  # already in the output from an earlier run
    failed: list[tuple[PromptItem, str]] = field(default_factory=list)
    interrupted: bool = False
    repaired: str | None = None  # what open_output fixed at the end of the file
    drafted: int = 0
    accepted: int = 0
    tokens: int = 0
    started: float = field(default_factory=time.monotonic)
    parallel: int = 1  # prompts decoded together
    context_full: int = 0  # answers cut short because the context was full (finish_reason "context")

    @property
    def tokens_per_s(self) -> float:
        """All prompts together, since the run started (what a batch user waits on)."""
        return self.tokens / max(time.monotonic() - self.started, 1e-9)

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None


def config_for(config: GenerationConfig, item: PromptItem) -> GenerationConfig:
    """Each prompt samples from its own generator, seeded from the run's seed and the prompt's id:
    its text then depends neither on how many prompts share a decode nor on which finished first,
    and a resumed run draws what the first run would have. No seed: a fresh random one each."""
    params = config.sampling
    if params.greedy or params.seed is None:
        return config
    digest = hashlib.sha256(f"{params.seed}:{id_key(item.id)}".encode()).digest()
    return replace(config, sampling=replace(params, seed=int.from_bytes(digest[:8], "little")))


# (prompts finished this run, prompts to do this run, the item just finished, report so far)
BatchProgress = Callable[[int, int, PromptItem | None, BatchReport], None]


def run_batch(runtime: Session, items: Sequence[PromptItem], config: GenerationConfig,
              out_path: str | Path, *, system: str | None = None, state: OutputState | None = None,
              progress: BatchProgress | None = None) -> BatchReport:
    """Generate for every item whose id is not yet in out_path, appending each as it finishes.
    Several prompts are decoded together (the runtime's --parallel); a record is written the
    moment its prompt is done, so the file's order is finishing order, not input order. `state`
    is open_output's reading of out_path, when the caller already took it (to fail early).
    A KeyboardInterrupt abandons the prompts in flight and returns; the file stays valid."""
    progress = progress or (lambda *a: None)
    state = state or open_output(out_path)
    report = BatchReport(repaired=state.repaired)
    todo = [item for item in items if id_key(item.id) not in state.done]
    report.skipped = len(items) - len(todo)
    writer = OutputWriter(out_path)
    finished = 0
    report.parallel = runtime.parallelism

    def requests() -> Iterator[Request]:
        nonlocal finished
        for n, item in enumerate(todo):
            try:
                prompt = runtime.prompt_tokens(item.prompt, item.system or system)
            except SpecllamaError as e:  # too long, say: this prompt fails, the others go on
                report.failed.append((item, str(e)))
                finished += 1
                progress(finished, len(todo), item, report)
                continue
            yield Request(prompt, config_for(config, item), tag=n)

    try:
        progress(0, len(todo), None, report)
        for tag, event in runtime.run_many(requests()):
            if isinstance(event, FailedEvent):
                report.failed.append((todo[tag], event.message))
            elif isinstance(event, DoneEvent):
                summary = event.summary
                with signals_deferred():  # the line and its count together
                    writer.write(make_record(todo[tag], summary))
                    report.written += 1
                    report.drafted += summary.drafted
                    report.accepted += summary.accepted
                    report.tokens += summary.tokens
                    report.context_full += summary.finish_reason == "context"
            else:
                continue
            finished += 1
            progress(finished, len(todo), todo[tag], report)
    except KeyboardInterrupt:
        report.interrupted = True
    finally:
        writer.close()
    return report
