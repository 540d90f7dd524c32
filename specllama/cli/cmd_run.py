"""`specllama run`: one completion streamed to stdout; statistics to stderr."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specllama.cli.options import generation_config, load_options
from specllama.cli.progress import download_bar
from specllama.cli.summary_text import format_summary
from specllama.decoding.events import DoneEvent, TokenEvent
from specllama.errors import SpecllamaError
from specllama.runtime import Runtime


class PromptSourceError(SpecllamaError):
    """The prompt cannot be read (missing file, not UTF-8, both a prompt and -f)."""


def read_prompt(args: argparse.Namespace) -> str:
    """The prompt argument, `-` for stdin, or -f FILE (a 200 KB prompt cannot be an argument)."""
    from specllama.cli.main import DEFAULT_PROMPT

    if args.prompt_file is not None and args.prompt is not None:
        raise PromptSourceError("give the prompt as an argument or with -f FILE, not both")
    if args.prompt_file is not None:
        path = Path(args.prompt_file)
        try:
            return path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise PromptSourceError(f"{path} is not UTF-8 text") from None
        except OSError as e:
            raise PromptSourceError(f"cannot read the prompt file {path}: {e.strerror or e}") from None
    if args.prompt == "-":
        try:
            return sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError:
            raise PromptSourceError("the prompt on stdin is not UTF-8 text") from None
    return DEFAULT_PROMPT if args.prompt is None else args.prompt


def _emit(text: str) -> None:
    from specllama.cli.main import StdoutClosedError

    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise  # `| head` took what it wanted: main() ends quietly
    except (OSError, ValueError, AttributeError) as e:  # closed (>&-: stdout is None or its fd is bad)
        reason = getattr(e, "strerror", None) or str(e)
        raise StdoutClosedError(f"cannot write the output to stdout ({reason})") from None


def cmd_run(args: argparse.Namespace) -> int:
    from specllama.cli.main import StdoutClosedError

    if sys.stdout is None:  # started with stdout closed (`>&-`): say so before loading anything
        raise StdoutClosedError("stdout is closed: there is nowhere to write the output")
    config = generation_config(args)  # validate sampling options before loading anything
    prompt_text = read_prompt(args)
    if not prompt_text.strip():
        raise PromptSourceError("the prompt is empty")
    with download_bar() as progress:
        runtime = Runtime(load_options(args), progress=progress, status=lambda m: print(m, file=sys.stderr))
    with runtime:
        generation = runtime.generate(runtime.prompt_tokens(prompt_text, args.system), config)
        for event in generation:
            if isinstance(event, (TokenEvent, DoneEvent)) and event.text:
                _emit(event.text)
        _emit("\n")
        if args.stats:
            print(format_summary(generation.summary, runtime, config), file=sys.stderr)
            if getattr(args, "random_seed", False):
                print(f"seed {config.sampling.seed} (random, from --seed -1)", file=sys.stderr)
    return 0
