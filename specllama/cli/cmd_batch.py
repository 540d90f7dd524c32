"""`specllama batch FILE -o OUT.jsonl`: every prompt of FILE through the engine, resumable."""

from __future__ import annotations

import argparse
import signal
import sys
from contextlib import contextmanager
from typing import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from specllama.batch.prompts_file import PromptItem, id_key, read_prompts

# llama.cpp is loaded only when a batch runs, so building the parser (`--help`) stays instant.


def add_batch_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE",
                   help="prompts: JSONL with \"id\" and \"prompt\" (optional \"system\"), or plain text, one a line; - reads stdin")
    p.add_argument("-o", "--output", required=True, metavar="OUT.jsonl",
                   help="results, one JSON line per prompt; ids already there are skipped (resume)")
    p.add_argument("--system", help="a system message for prompts that do not carry their own")
    from specllama.cli.cmd_batch_remote import add_server_arguments
    add_server_arguments(p)


def cmd_batch(args: argparse.Namespace) -> int:
    from specllama.batch.output import locked_output
    from specllama.cli.options import generation_config
    from specllama.cli.paths import check_writable

    if args.server or args.servers_file:
        from specllama.cli.cmd_batch_remote import cmd_remote_batch
        check_writable(args.output, "-o")
        with locked_output(args.output):  # one writer per output file, local or remote
            return cmd_remote_batch(args)

    # Cheap checks first: a bad prompts or output file should not cost a model load.
    config = generation_config(args)
    prompts = read_prompts(args.file)  # duplicate ids raise here, before any generation
    check_writable(args.output, "-o")
    # One run per output file, for the whole run and before any model loads: two batches on one
    # file would both answer every prompt.
    with locked_output(args.output):
        return _run_locked(args, prompts, config)


def _run_locked(args: argparse.Namespace, prompts, config) -> int:
    from specllama.batch.local import run_batch
    from specllama.cli.options import load_options
    from specllama.cli.progress import download_bar
    from specllama.runtime import Runtime

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    state, nothing_to_do = open_batch_output(args, prompts, err)
    if nothing_to_do is not None:
        return nothing_to_do
    with download_bar() as fetch:
        runtime = Runtime(load_options(args), progress=fetch, status=lambda m: print(m, file=sys.stderr))
    n = runtime.parallelism
    why = f" to start ({runtime.parallel_reason()})" if args.parallel == "auto" else ""
    err.print(f"specllama: {n} prompt(s) per decode{why}", markup=False)
    with runtime, sigterm_as_interrupt(), batch_progress(err) as progress:
        report = run_batch(runtime, prompts.items, config, args.output,
                           system=args.system, state=state, progress=progress)
    return report_outcome(args, prompts, report, err)


def open_batch_output(args: argparse.Namespace, prompts, err: Console):
    """For a local or a server batch alike: reports malformed lines, reads (and repairs) OUT.
    Returns (its state, an exit status when nothing is left to do, else None)."""
    from specllama.batch.output import open_output, refuse_changed_prompts

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
    if not_attempted:
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


@contextmanager
def batch_progress(console: Console) -> Iterator:
    """A bar with ETA and running acceptance on a terminal; one line per prompt otherwise."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TimeRemainingColumn(), TextColumn("{task.fields[acceptance]}"))
    with Progress(*columns, console=console, disable=not console.is_terminal) as bar:
        task = bar.add_task("batch", total=None, acceptance="")

        def update(done: int, total: int, item: PromptItem | None, report) -> None:  # a batch.BatchProgress
            acc = f"acceptance {report.acceptance:.0%}" if report.acceptance is not None else ""
            active = min(report.parallel, total - done)
            speed = f"{active} active · {report.tokens_per_s:.1f} tok/s" + (f" · {acc}" if acc else "")
            bar.update(task, completed=done, total=total, acceptance=speed,
                       description=f"batch ({len(report.failed)} failed)" if report.failed else "batch")
            if item is not None and not console.is_terminal:
                status = "failed" if report.failed and report.failed[-1][0] is item else "done"
                console.print(f"[{done}/{total}] {item.id}: {status}, {speed}", markup=False)

        yield update
