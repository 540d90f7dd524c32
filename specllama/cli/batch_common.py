"""What a local batch and a server batch share: opening (and repairing) the output, the closing
report and exit status, and `kill PID` stopping between prompts like Ctrl-C."""

from __future__ import annotations

import argparse
import signal
from contextlib import contextmanager
from typing import Iterator

from rich.console import Console

from specllama.batch.prompts_file import id_key


def open_batch_output(args: argparse.Namespace, prompts, err: Console):
    """For a local or a server batch alike: reports malformed lines, reads (and repairs) OUT.
    Returns (its state, an exit status when nothing is left to do, else None)."""
    from specllama.batch.output import open_output, refuse_changed_prompts  # with the batch only: keeps --help light

    for bad in prompts.bad:
        err.print(f"specllama: {args.file} {bad} (skipped)", markup=False)
    state = open_output(args.output, inputs=[args.file])
    refuse_changed_prompts(args.output, prompts.items, state)
    if state.repaired:
        err.print(f"specllama: {args.output}: {state.repaired}", markup=False)
    if not prompts.items:
        what = f"no usable prompts ({len(prompts.bad)} malformed line(s))" if prompts.bad else "no prompts (it is empty)"
        err.print(f"specllama: {args.file} holds {what}; nothing to do", markup=False)
        return state, 1
    if all(id_key(item.id) in state.done for item in prompts.items):
        err.print(f"specllama: all {len(prompts.items)} prompts are already in {args.output}", markup=False)
        return state, 1 if prompts.bad else 0
    return state, None


def report_outcome(args: argparse.Namespace, prompts, report, err: Console, not_attempted: int = 0) -> int:
    """The closing lines and exit status of a local or a server batch. `not_attempted`: prompts a
    server batch gave up on because no server answered."""
    for item, reason in report.failed:
        err.print(f"specllama: prompt {item.id!r} (line {item.line}) failed: {reason}", markup=False)
    refused = getattr(report, "refused", {})  # a server batch's: servers that refused the API key
    for url, answer in refused.items():
        err.print(f"specllama: {url} refused the API key ({answer}): set SPECLLAMA_API_KEY (or OPENAI_API_KEY) to "
                  "the key it was started with", markup=False)
    if not_attempted and refused and len(refused) == len(getattr(report, "servers", refused)):
        err.print(f"specllama: {not_attempted} prompt(s) not done: the server refused the API key", markup=False)
    elif not_attempted:
        err.print(f"specllama: {not_attempted} prompt(s) not done: no server answered through a whole "
                  "retry schedule; rerun the same command when they are back", markup=False)
    if getattr(report, "context_full", 0):  # a local batch's; servers say "length" for both
        err.print(f"specllama: {report.context_full} answer(s) stopped because the context was full (finish_reason "
                  "\"context\"), not at --max-tokens; raise --ctx to let them finish", markup=False)
    acc = f", acceptance {report.acceptance:.1%}" if report.acceptance is not None else ""
    err.print(f"specllama: {report.written} written, {report.skipped} already done, {len(report.failed)} failed, "
              f"{len(prompts.bad)} malformed line(s){acc} -> {args.output}", markup=False)
    if report.interrupted:
        err.print("specllama: interrupted; the output is complete up to the last line, rerun the same "
                  "command to finish the rest", markup=False)
        return 130
    return 1 if report.failed or not_attempted or prompts.bad else 0


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """`kill PID` stops between tokens like Ctrl-C does, instead of dying mid-write."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt
    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread (embedded use): leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
