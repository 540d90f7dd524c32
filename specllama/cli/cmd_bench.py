"""`specllama bench`: parse options, load the models once, run the benchmark, print and write it."""

from __future__ import annotations

import argparse
import sys

from specllama.batch.prompts_file import read_prompts
from specllama.bench.configs import DEFAULT_CONFIGS, parse_configs
from specllama.cli.arguments import add_draft_shape_option, add_model_options, add_status_options, at_least_one, seed_value
from specllama.cli.cmd_bench_parallel import cmd_bench_parallel
from specllama.cli.paths import OutputPathError, check_writable

# llama.cpp is loaded only when a benchmark runs, so building the parser (`--help`) stays instant.

HELP = "benchmark draft configurations against plain decoding"
DESCRIPTION = """Run every prompt under each configuration, interleaved, and compare tokens/s with plain
decoding (the 'none' configuration, always included); greedy outputs are checked against it.

  specllama bench --prompts prompts.jsonl --repeat 3 --json results.json

The JSON schema and measured results: docs/benchmarks.md."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bench_arguments(p)
    add_model_options(p)
    add_status_options(p)


def add_bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prompts", required=True, metavar="FILE",
                   help="JSONL with \"id\" and \"prompt\" (chat template applied), or plain text, one prompt a line")
    p.add_argument("--configs", default=DEFAULT_CONFIGS,
                   help=f"configurations separated by ';' (default \"{DEFAULT_CONFIGS}\"); 'none' is always included")
    p.add_argument("-n", "--max-tokens", type=at_least_one, default=128, metavar="N",
                   help="tokens generated per run (default %(default)s)")
    p.add_argument("--repeat", type=at_least_one, default=1,
                   help="runs per configuration and prompt (median taken; default %(default)s)")
    p.add_argument("--temp", type=float, default=0.0, help="temperature (default 0: greedy, outputs checked against none)")
    p.add_argument("--seed", type=seed_value,
                   help="sampling seed (every run uses it; -1 = a random one; default: none, greedy needs none)")
    p.add_argument("--json", metavar="OUT",
                   help="write the full results as JSON (schema in docs/benchmarks.md; default: not written)")
    p.add_argument("--markdown", metavar="OUT", help="write the summary table as Markdown (default: not written)")
    p.add_argument("--parallel", metavar="N,N,...",
                   help="instead of --configs: a batch job's throughput with N prompts per decode, e.g. 1,2,4,auto "
                        "(plain decoding; --repeat rounds, interleaved; N = 1 is the baseline; default: off)")
    add_draft_shape_option(p)
    p.add_argument("--draft-corpus", metavar="FILE",
                   help="a UTF-8 text file the suffix drafter also drafts from (default: none)")


def run(args: argparse.Namespace) -> int:
    from specllama.bench.benchmark import BenchError, BenchOptions, bench_prompts, run_benchmark
    from specllama.bench.report import markdown, terminal_table, write_json, write_text
    from specllama.cli.options import resolved_for, status_lines
    from specllama.cli.progress import bench_progress, download_bar
    from specllama.runtime.loaded import open_runtime

    # Everything the user typed is checked before minutes of model loading.
    configs = parse_configs(args.configs)
    if args.max_tokens < 1 or args.repeat < 1:
        raise BenchError("--max-tokens and --repeat must be at least 1")
    status = status_lines(args)
    # The draft model is loaded for a model config, and for auto only where it pays (the runtime
    # decides); the target context is the one every config's verifier can use (decoding/verifiers.py).
    resolved = resolved_for(args, status, session_drafters=tuple(dict.fromkeys(c.drafter for c in configs)),
                            session_verifiers=tuple(dict.fromkeys(c.verify for c in configs)))
    sampling = resolved.settings.sampling
    prompt_file = read_prompts(args.prompts)
    if prompt_file.bad:
        raise BenchError(f"{args.prompts}: " + "; ".join(map(str, prompt_file.bad[:5]))
                         + " (a benchmark needs every prompt; fix or remove these lines)")
    if not prompt_file.items:
        raise BenchError(f"{args.prompts} holds no prompts")
    from specllama.cli.paths import refuse_clashing_outputs
    outputs = [(flag, path) for flag, path in (("--json", args.json), ("--markdown", args.markdown)) if path]
    refuse_clashing_outputs(outputs, inputs=[("--prompts", args.prompts)]
                            + ([("--draft-corpus", args.draft_corpus)] if args.draft_corpus else []))
    for flag, path in outputs:
        check_writable(path, flag)  # a benchmark that cannot write its results loses them all

    if args.parallel:
        return cmd_bench_parallel(args, prompt_file.items, status)

    opts = resolved.load
    with download_bar() as fetch:
        runtime = open_runtime(opts, resolved.registry, progress=fetch, status=status)
    with runtime:
        prompts = bench_prompts(runtime, prompt_file.items)
        options = BenchOptions(max_tokens=args.max_tokens, repeat=args.repeat, sampling=sampling)
        from specllama.runtime.options import EXACT_MODE

        settings = {"prompts_file": str(args.prompts), "decoding": EXACT_MODE if opts.exact else "default"}
        with bench_progress() as progress:
            outcome = run_benchmark(runtime, prompts, configs, options, progress=progress, settings=settings)

    doc = outcome.document
    print(terminal_table(outcome.summaries, outcome.curve, doc["machine"], outcome.head_cost, outcome.switch))
    if opts.exact:
        print(f"{EXACT_MODE}: every configuration, none included, decodes this way; 'identical to none' compares "
              "with plain decoding in exact mode, whose text can differ from a default run")
    try:
        if args.json:
            write_json(args.json, doc)
        if args.markdown:
            write_text(args.markdown, markdown(outcome.summaries, outcome.curve, doc["machine"], doc["models"],
                                               outcome.head_cost, outcome.switch))
    except OSError as e:  # checked writable at the start; a full disk can still fail here
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
