"""Command line: `specllama chat | run | batch | bench | models ...`.

User mistakes arrive here as SpecllamaError and leave as one line on stderr with a non-zero exit;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import sys

from specllama.cli.version import VersionAction
from specllama.decoding.request import DRAFTERS, K_MAX, PARALLEL_AUTO_MAX, PARALLEL_MAX, VERIFY_MODES, drafter_name
from specllama.errors import SpecllamaError

DEFAULT_PROMPT = "Write a Python function that tells whether a number is prime, with a short docstring."


def draft_length(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of tokens or 'auto', got {text!r}") from None
    if not 0 <= k <= K_MAX:
        raise argparse.ArgumentTypeError(f"k must be between 0 and {K_MAX}, got {k}")
    return k


def parallel_count(text: str) -> int | str:
    if text == "auto":
        return text
    n = at_least_one(text)
    if n > PARALLEL_MAX:
        raise argparse.ArgumentTypeError(f"at most {PARALLEL_MAX} prompts at once, got {n}")
    return n


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def at_least_one(text: str) -> int:
    n = _whole_number(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def thread_count(text: str) -> int:
    """At least 1; more than this process may run on is allowed (the user may know better, e.g.
    under a changing affinity) but said on stderr, since oversubscription slows llama.cpp badly."""
    n = at_least_one(text)
    from specllama.llama.backend import default_threads  # only when the option is given: keeps --help instant

    cores = default_threads()
    if n > cores:
        print(f"specllama: warning: {n} threads on {cores} available core(s) will run slower than {cores}",
              file=sys.stderr)
    return n


def context_size(text: str) -> int:
    n = _whole_number(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (the model's training context) or a positive size, got {n}")
    return n


def seed_value(text: str) -> int:
    n = _whole_number(text)
    if n < -1:
        raise argparse.ArgumentTypeError(f"must be a seed >= 0, or -1 for a random one, got {n}")
    return n


def add_model_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("models")
    g.add_argument("--pair", help="a named pair from models.toml (default: the registry's default pair)")
    g.add_argument("--target", help="target model: a registry name or a GGUF path")
    g.add_argument("--draft", help="draft model: a registry name or a GGUF path")
    g.add_argument("--ctx", type=context_size, default=4096, dest="n_ctx",
                   help="context size in tokens (default 4096; 0 = the model's training context; never more than it)")
    g.add_argument("--threads", type=thread_count, help="llama.cpp threads (default: all cores available)")
    g.add_argument("--threads-batch", type=thread_count, help="threads for batched decodes (default: --threads)")
    g.add_argument("--gpu-layers", type=int, default=None,
                   help="layers offloaded to Metal/CUDA (default: all where llama.cpp can offload, else 0; -1 all)")
    g.add_argument("--exact", action="store_true",
                   help="greedy output that does not depend on the batch shape: identical to plain decoding "
                        "whatever K is (no repacked weights, a Q8_0 KV cache, at most 6 drafts a step; see README)")


def add_engine_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("speculation and sampling")
    g.add_argument("--drafter", choices=DRAFTERS, type=drafter_name, default="auto",
                   help="where drafts come from: auto (default: per step, the suffix drafter or the draft model, "
                        "whichever this machine's costs say pays, else none; the draft model is loaded only where "
                        "it can pay), suffix (earlier text: prompt, output, earlier prompts of the session, "
                        "--draft-corpus; 'lookup' is an alias), model (the draft model), none (plain decoding)")
    g.add_argument("--draft-corpus", metavar="FILE",
                   help="a UTF-8 text file the suffix drafter also drafts from (e.g. the code a question is about)")
    g.add_argument("--no-draft", action="store_true", help="plain decoding (same as --drafter none)")
    g.add_argument("-k", type=draft_length, default="auto", dest="k",
                   help="draft tokens per step, or 'auto' (default): chosen each step from this machine's "
                        "measured costs and the running acceptance, 0 (plain decoding) when speculation would lose")
    g.add_argument("--p-min", type=float, default=0.0, help="stop a draft when its top probability falls below this")
    g.add_argument("--verify", choices=VERIFY_MODES, default="causal", help="verification scheme")
    g.add_argument("--temp", type=float, default=0.0, help="temperature (0 = greedy, the default)")
    g.add_argument("--top-k", type=int, default=0)
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--min-p", type=float, default=0.0)
    g.add_argument("--seed", type=seed_value, help="seed for sampling (reproducible when set; -1 = a random seed, "
                                                "shown by --stats)")
    g.add_argument("--max-tokens", type=at_least_one, default=512, help="tokens to generate at most (default 512)")
    g.add_argument("--stop", action="append", default=[], help="a stop string (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specllama", description="Speculative decoding for local GGUF models.")
    parser.add_argument("--version", action=VersionAction,
                        help="specllama's, llama-cpp-python's and llama.cpp's versions and build")
    sub = parser.add_subparsers(dest="command", required=True)

    chat = sub.add_parser("chat", help="a multi-turn chat in the terminal that shows speculation live",
                          description="A terminal chat that colours each token by origin and shows speed and "
                                      "acceptance live. The draft model is loaded whenever the pair or --draft "
                                      "names one, so the drafter, K, temperature and p_min change without "
                                      "reloading. F1 in the app lists the keys.")
    chat.add_argument("--system", help="a system message")
    add_model_options(chat)
    add_engine_options(chat)

    run = sub.add_parser("run", help="generate one completion for a prompt (chat template applied)")
    run.add_argument("prompt", nargs="?", help="the prompt; '-' reads it from stdin (default: a sample prompt)")
    run.add_argument("-f", "--file", metavar="FILE", dest="prompt_file",
                     help="read the prompt from FILE (UTF-8), for prompts too long for the command line")
    run.add_argument("--system", help="a system message")
    run.add_argument("--stats", action="store_true", help="print speed and acceptance statistics to stderr")
    add_model_options(run)
    add_engine_options(run)

    from specllama.cli.cmd_batch import add_batch_arguments
    from specllama.cli.cmd_bench import add_bench_arguments

    batch = sub.add_parser("batch", help="generate for every prompt of a file into JSONL (resumable)")
    add_batch_arguments(batch)
    batch.add_argument("--parallel", type=parallel_count, default="auto", metavar="N|auto",
                       help="prompts decoded together in one batch (default auto: the number that makes the most "
                            f"tokens/s on this machine's measured costs, at most {PARALLEL_AUTO_MAX}; each holds "
                            "--ctx tokens of cache)")
    add_model_options(batch)
    add_engine_options(batch)

    bench = sub.add_parser("bench", help="benchmark draft configurations against plain decoding")
    add_bench_arguments(bench)
    add_model_options(bench)

    from specllama.cli import cmd_serve
    cmd_serve.add_arguments(sub.add_parser("serve", help=cmd_serve.HELP, description=cmd_serve.DESCRIPTION))

    costs = sub.add_parser("costs", help="this machine's measured costs: why speculation is or is not faster")
    costs.add_argument("--remeasure", action="store_true", help="measure again even if a cached curve exists")
    costs.add_argument("--drafter", choices=("model", "suffix"), type=drafter_name, default="model",
                       help="model or suffix ('lookup' is an alias of suffix)")
    costs.add_argument("--parallel", action="store_const", const="auto", default=1,
                       help="also measure large batches (to 64 tokens) and show how many prompts to decode together")
    add_model_options(costs)

    models = sub.add_parser("models", help="list, fetch, inspect and check models")
    msub = models.add_subparsers(dest="models_command", required=True)
    msub.add_parser("list", help="registered models: role, size, cached or not")
    pull = msub.add_parser("pull", help="download, assemble and verify a registered model")
    pull.add_argument("name")
    pull.add_argument("--from-hub", action="store_true", help="allow a download from the model hub")
    info = msub.add_parser("info", help="what a GGUF file holds, from its header alone")
    info.add_argument("model", help="a registry name or a GGUF path")
    quant = msub.add_parser("quantize", help="requantize a model (e.g. a cheaper Q4_0 draft) and register it")
    quant.add_argument("model", help="a registry name or a GGUF path")
    quant.add_argument("--type", default="Q4_0", help="Q4_0 (default), Q4_1, Q5_0, Q8_0, Q4_K_M, ...")
    quant.add_argument("--name", help="the registry name of the result (default: MODEL-TYPE)")
    quant.add_argument("--threads", type=thread_count)
    verify = msub.add_parser("verify", help="sha256 of cached models against models.toml (exit 1 on a mismatch)")
    verify.add_argument("name", nargs="?", help="one registered model (default: all)")
    check = msub.add_parser("check", help="can DRAFT speculate for TARGET? (headers only)")
    check.add_argument("draft")
    check.add_argument("target")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "chat":
            from specllama.cli.cmd_chat import cmd_chat
            return cmd_chat(args)
        if args.command == "run":
            from specllama.cli.cmd_run import cmd_run
            return cmd_run(args)
        if args.command == "batch":
            from specllama.cli.cmd_batch import cmd_batch
            return cmd_batch(args)
        if args.command == "bench":
            from specllama.cli.cmd_bench import cmd_bench
            return cmd_bench(args)
        if args.command == "serve":
            from specllama.cli import cmd_serve
            return cmd_serve.run(args)
        if args.command == "costs":
            from specllama.cli.cmd_costs import cmd_costs
            return cmd_costs(args)
        if args.command == "models":
            from specllama.cli import cmd_models as models
            return models.dispatch(args)
    except StdoutClosedError as e:  # `specllama run hi >&-`
        _quiet_stdout()
        print(f"specllama: error: {e}", file=sys.stderr)
        return e.exit_code
    except SpecllamaError as e:
        print(f"specllama: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("specllama: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `specllama run ... | head`
        _quiet_stdout()
        return 0
    return 2


class StdoutClosedError(SpecllamaError):
    """Standard output cannot be written: closed (`>&-`) or failing (a full disk under `>`)."""

    exit_code = 1


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's flush at exit does not fail a second time."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass
    sys.stdout = open(os.devnull, "w")
