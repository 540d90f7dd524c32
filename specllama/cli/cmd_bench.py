"""`specllama bench`: parse options, load the models once, run the benchmark, print and write it."""

from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager
from typing import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from specllama.batch.prompts_file import read_prompts
from specllama.bench.configs import DEFAULT_CONFIGS, parse_configs
from specllama.decoding.sampling import SamplingParams

# llama.cpp is loaded only when a benchmark runs, so building the parser (`--help`) stays instant.


def add_bench_arguments(p: argparse.ArgumentParser) -> None:
    from specllama.cli.main import at_least_one, seed_value
    p.add_argument("--prompts", required=True, metavar="FILE",
                   help="JSONL with \"id\" and \"prompt\" (chat template applied), or plain text, one prompt a line")
    p.add_argument("--configs", default=DEFAULT_CONFIGS,
                   help=f"configurations separated by ';' (default \"{DEFAULT_CONFIGS}\"); 'none' is always included")
    p.add_argument("--max-tokens", type=at_least_one, default=128, help="tokens generated per run (default 128)")
    p.add_argument("--repeat", type=at_least_one, default=1, help="runs per configuration and prompt (median taken; default 1)")
    p.add_argument("--temp", type=float, default=0.0, help="temperature (default 0: greedy, outputs checked against none)")
    p.add_argument("--seed", type=seed_value, help="sampling seed (every run uses it; -1 = a random one)")
    p.add_argument("--json", metavar="OUT", help="write the full results as JSON (schema in README, ## Benchmark)")
    p.add_argument("--markdown", metavar="OUT", help="write the summary table as Markdown")
    p.add_argument("--parallel", metavar="N,N,...",
                   help="instead of --configs: a batch job's throughput with N prompts per decode, e.g. 1,2,4,auto "
                        "(plain decoding; --repeat rounds, interleaved; N = 1 is the baseline)")
    p.add_argument("--draft-corpus", metavar="FILE", help="a UTF-8 text file the suffix drafter also drafts from")


def cmd_bench(args: argparse.Namespace) -> int:
    from specllama.bench.benchmark import BenchError, BenchOptions, bench_prompts, run_benchmark
    from specllama.bench.report import markdown, terminal_table, write_json, write_text
    from specllama.cli.options import load_options
    from specllama.cli.progress import download_bar
    from specllama.runtime import Runtime

    # Everything the user typed is checked before minutes of model loading.
    configs = parse_configs(args.configs)
    if args.max_tokens < 1 or args.repeat < 1:
        raise BenchError("--max-tokens and --repeat must be at least 1")
    from specllama.cli.options import resolve_seed
    sampling = SamplingParams(temperature=args.temp, seed=resolve_seed(args.seed))
    prompt_file = read_prompts(args.prompts)
    if prompt_file.bad:
        raise BenchError(f"{args.prompts}: " + "; ".join(map(str, prompt_file.bad[:5]))
                         + " (a benchmark needs every prompt; fix or remove these lines)")
    if not prompt_file.items:
        raise BenchError(f"{args.prompts} holds no prompts")
    from specllama.cli.paths import check_writable, refuse_clashing_outputs
    outputs = [(flag, path) for flag, path in (("--json", args.json), ("--markdown", args.markdown)) if path]
    refuse_clashing_outputs(outputs, inputs=[("--prompts", args.prompts)]
                            + ([("--draft-corpus", args.draft_corpus)] if args.draft_corpus else []))
    for flag, path in outputs:
        check_writable(path, flag)  # a benchmark that cannot write its results loses them all

    if args.parallel:
        from specllama.cli.cmd_bench_parallel import cmd_bench_parallel
        return cmd_bench_parallel(args, prompt_file.items)

    # The draft model is loaded for a model config, and for auto only where it can pay (the runtime
    # decides); stairs needs a multi-sequence target context; all configs then share it alike.
    opts = load_options(args, drafters=tuple(dict.fromkeys(c.drafter for c in configs)),
                        stairs=any(c.verify == "stairs" for c in configs))
    with download_bar() as fetch:
        runtime = Runtime(opts, progress=fetch, status=lambda m: print(m, file=sys.stderr))
    with runtime:
        prompts = bench_prompts(runtime, prompt_file.items)
        options = BenchOptions(max_tokens=args.max_tokens, repeat=args.repeat, sampling=sampling)
        from specllama.runtime import EXACT_MODE

        settings = {"prompts_file": str(args.prompts), "decoding": EXACT_MODE if opts.exact else "default"}
        with bench_progress() as progress:
            outcome = run_benchmark(runtime, prompts, configs, options, progress=progress, settings=settings)

    doc = outcome.document
    print(terminal_table(outcome.summaries, outcome.curve, doc["machine"]))
    if opts.exact:
        print(f"{EXACT_MODE}: every configuration, none included, decodes this way; 'identical to none' compares "
              "with plain decoding in exact mode, whose text can differ from a default run")
    try:
        if args.json:
            write_json(args.json, doc)
        if args.markdown:
            write_text(args.markdown, markdown(outcome.summaries, outcome.curve, doc["machine"], doc["models"]))
    except OSError as e:  # checked writable at the start; a full disk can still fail here
        from specllama.cli.paths import OutputPathError
        raise OutputPathError(f"cannot write {e.filename or 'the results'}: {e.strerror or e} "
                              "(the table above is the summary)") from None
    failed = [s for s in outcome.summaries if s.failed]
    for s in failed:
        print(f"specllama: config {s.config} failed: {s.failed}", file=sys.stderr)
    different = sum((s.identical or {}).get("different", 0) for s in outcome.summaries)
    if different:
        from specllama.bench.pairing import explain

        print(f"specllama: {different} greedy run(s) differ from plain decoding beyond a near-tie:", file=sys.stderr)
        for r in outcome.results:
            if r.identical == "different" and r.divergence:
                print(f"specllama:   {explain(r.config, r.prompt_id, r.divergence)}", file=sys.stderr)
    return 1 if failed or different else 0


@contextmanager
def bench_progress() -> Iterator:
    """A bar with ETA on a terminal; one line per finished run otherwise (logs stay readable)."""
    console = Console(stderr=True, soft_wrap=True)
    columns = (TextColumn("{task.description:<36}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, disable=not console.is_terminal) as bar:
        task = bar.add_task("bench", total=None)

        def update(done: int, total: int, what: str, record) -> None:  # a bench.runner.ProgressCallback
            bar.update(task, completed=done, total=total, description=what)
            if record is not None and not console.is_terminal:
                s = record.summary
                acc = f", acceptance {s.acceptance:.0%}" if s.acceptance is not None else ""
                console.print(f"[{done}/{total}] {what}: {s.tokens} tokens, {s.tokens_per_s:.2f} tok/s{acc}",
                              highlight=False, markup=False)

        yield update
