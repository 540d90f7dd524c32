"""`specllama batch FILE -o OUT.jsonl`: every prompt of FILE through the engine, resumable."""

from __future__ import annotations

import argparse
from contextlib import contextmanager
from typing import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from specllama.batch.prompts_file import PromptItem, read_prompts
from specllama.cli.arguments import add_engine_options, add_model_options, add_status_options, parallel_count
from specllama.cli.batch_common import open_batch_output, report_outcome, sigterm_as_interrupt
from specllama.cli.cmd_batch_remote import add_server_arguments, cmd_remote_batch
from specllama.cli.paths import check_writable
from specllama.decoding.request import PARALLEL_AUTO_MAX

# llama.cpp is loaded only when a batch runs, so building the parser (`--help`) stays instant.

HELP = "generate for every prompt of a file into JSONL (resumable), locally or on servers"
DESCRIPTION = """Generate an answer for every prompt of FILE, one JSON line each in OUT.jsonl.
Ids already in OUT.jsonl are skipped, so the same command resumes an interrupted batch.

  specllama batch prompts.jsonl -o answers.jsonl
  specllama batch prompts.txt -o answers.jsonl --server http://gpu-box:8080

See docs/batch-and-servers.md."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE",
                   help="prompts: JSONL with \"id\" and \"prompt\" (optional \"system\"), or plain text, one a line; - reads stdin")
    p.add_argument("-o", "--output", required=True, metavar="OUT.jsonl",
                   help="results, one JSON line per prompt; ids already there are skipped (resume)")
    p.add_argument("--system", help="a system message for prompts that do not carry their own (default: none)")
    p.add_argument("--parallel", type=parallel_count, default="auto", metavar="N|auto",
                   help="prompts decoded together in one batch (default auto: the number that makes the most "
                        f"tokens/s on this machine's measured costs, at most {PARALLEL_AUTO_MAX}; each holds "
                        "--ctx tokens of cache)")
    add_server_arguments(p)
    add_model_options(p)
    add_engine_options(p)
    add_status_options(p)


def run(args: argparse.Namespace) -> int:
    from specllama.batch.output import locked_output
    from specllama.cli.options import resolved_for, status_lines

    if args.server or args.servers_file:
        check_writable(args.output, "-o")
        with locked_output(args.output):  # one writer per output file, local or remote
            return cmd_remote_batch(args)

    # Cheap checks first: a bad prompts or output file should not cost a model load.
    status = status_lines(args)
    resolved = resolved_for(args, status)
    prompts = read_prompts(args.file)  # duplicate ids raise here, before any generation
    check_writable(args.output, "-o")
    # One run per output file, for the whole run and before any model loads: two batches on one
    # file would both answer every prompt.
    with locked_output(args.output):
        return _run_locked(args, prompts, resolved, status)


def _run_locked(args: argparse.Namespace, prompts, resolved, status) -> int:
    from dataclasses import replace

    from specllama.batch.local import run_batch
    from specllama.batch.prompts_file import id_key
    from specllama.cli.progress import download_bar
    from specllama.cli.stability_note import parallel_text_note
    from specllama.runtime.loaded import open_runtime

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    state, nothing_to_do = open_batch_output(args, prompts, err)
    if nothing_to_do is not None:
        return nothing_to_do
    left = sum(1 for item in prompts.items if id_key(item.id) not in state.done)  # no slot for a prompt done before
    with download_bar() as fetch:
        runtime = open_runtime(replace(resolved.load, prompts=left), resolved.registry, progress=fetch, status=status)
    n = runtime.parallelism
    why = f" to start ({runtime.parallel_reason()})" if args.parallel == "auto" else ""
    status.say(f"{n} prompt(s) per decode{why}")
    note = parallel_text_note(runtime.describe().slots, greedy=resolved.settings.sampling.temperature == 0, exact=args.exact)
    if note:
        status.say(note)
    with runtime, sigterm_as_interrupt(), batch_progress(err) as progress:
        report = run_batch(runtime, prompts.items, resolved.config(), args.output,
                           system=args.system, state=state, progress=progress)
    return report_outcome(args, prompts, report, err)


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
