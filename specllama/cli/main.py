"""Command line: `specllama chat | run | batch | bench | costs | models | completion`.

A table of commands, each a module with HELP, DESCRIPTION, add_arguments(parser) and run(args),
and the one mapping from what went wrong to the exit status (arguments.EXIT_CODES_TEXT): user
mistakes arrive as SpecllamaError and leave as one line on stderr; anything else is a bug and keeps
its traceback.
"""

from __future__ import annotations

import argparse
import sys

from specllama.batch.server_client import ServerUrlError
from specllama.bench.configs import BenchConfigError
from specllama.cli import (
    cmd_batch,
    cmd_bench,
    cmd_chat,
    cmd_completion,
    cmd_costs,
    cmd_models,
    cmd_ps,
    cmd_pull,
    cmd_run,
    cmd_serve,
    cmd_show,
)
from specllama.cli.arguments import (
    EXIT_CODES_TEXT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    HelpFormatter,
    track_given,
)
from specllama.cli.help_text import SHORT_HELP, add_examples
from specllama.cli.output import StdoutClosedError, quiet_stdout
from specllama.cli.version import VersionAction
from specllama.errors import SpecllamaError, UsageError
from specllama.llama import thread_wait

# Adding a command is one line here.
COMMANDS = {
    "chat": cmd_chat,
    "run": cmd_run,
    "batch": cmd_batch,
    "bench": cmd_bench,
    "serve": cmd_serve,
    "ps": cmd_ps,
    "pull": cmd_pull,
    "show": cmd_show,
    "costs": cmd_costs,
    "models": cmd_models,
    "completion": cmd_completion,
}

# Mistakes in what was typed (exit 2, like argparse's own); every other SpecllamaError is 1.
USAGE_ERRORS = (UsageError, BenchConfigError, ServerUrlError)

DESCRIPTION = """Speculative decoding for local GGUF models on llama.cpp: a small draft model (or text seen
before) proposes tokens, the model you asked for checks them all in one step.

  specllama chat                          a terminal chat (the default pair is fetched on first use)
  specllama run "a question"              one answer on stdout
  git diff | specllama run "review this"  piped text joins the prompt"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specllama", description=DESCRIPTION, epilog=EXIT_CODES_TEXT,
                                     formatter_class=HelpFormatter)
    parser.add_argument("--version", action=VersionAction,
                        help="specllama's, llama-cpp-python's and llama.cpp's versions and build")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in COMMANDS.items():
        command = sub.add_parser(name, help=module.HELP, description=module.DESCRIPTION, epilog=EXIT_CODES_TEXT,
                                 formatter_class=HelpFormatter)
        module.add_arguments(command)
        track_given(command)  # which options were typed: they win over saved settings (cli/intent.py)
        command.set_defaults(run=module.run, root_parser=parser, command_parser=command)
    add_examples(parser)
    return parser


def exit_status(error: SpecllamaError) -> int:
    return EXIT_USAGE if isinstance(error, USAGE_ERRORS) else EXIT_FAILED


def say_thread_wait() -> None:
    """-v: how llama.cpp's threads wait, and each time they follow other processes (llama/thread_share.py)."""
    from specllama.llama import thread_share

    def say(text: str) -> None:
        print(f"specllama: {text}", file=sys.stderr, flush=True)

    share = thread_share.current()
    say(f"threads between ops: {thread_wait.in_force()}" + ("; fewer threads while other processes want the cores"
                                                             if share is not None and share.enabled else ""))
    if share is not None:
        share.say = say


def main(argv: list[str] | None = None) -> int:
    if not (sys.argv[1:] if argv is None else argv):  # bare `specllama`: where to start, not a usage error
        print(SHORT_HELP)
        return EXIT_OK
    args = build_parser().parse_args(argv)
    try:
        # Before any command loads llama.cpp: OpenMP reads how its threads wait once, at load.
        thread_wait.configure(getattr(args, "thread_wait", None), getattr(args, "threads", None))
        if getattr(args, "verbose", False) and not getattr(args, "quiet", False):
            say_thread_wait()
        return args.run(args)
    except StdoutClosedError as e:  # `specllama run hi >&-`
        quiet_stdout()
        print(f"specllama: error: {e}", file=sys.stderr)
        return EXIT_FAILED
    except SpecllamaError as e:
        if isinstance(e, USAGE_ERRORS):  # like argparse: the command's usage line, then the mistake
            args.command_parser.print_usage(sys.stderr)
        print(f"specllama: error: {e}", file=sys.stderr)
        return exit_status(e)
    except KeyboardInterrupt:
        print("specllama: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `specllama run ... | head`
        quiet_stdout()
        return EXIT_OK
