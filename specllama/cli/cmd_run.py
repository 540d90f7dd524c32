"""`specllama run`: one completion streamed to stdout; statistics to stderr."""

from __future__ import annotations

import argparse
import sys

from specllama.cli.options import generation_config, load_options
from specllama.cli.progress import download_bar
from specllama.cli.summary_text import format_summary
from specllama.decoding.events import DoneEvent, TokenEvent
from specllama.decoding.runtime import Runtime


def cmd_run(args: argparse.Namespace) -> int:
    config = generation_config(args)  # validate sampling options before loading anything
    with download_bar() as progress:
        runtime = Runtime(load_options(args), progress=progress, status=lambda m: print(m, file=sys.stderr))
    with runtime:
        generation = runtime.generate(runtime.prompt_tokens(args.prompt, args.system), config)
        for event in generation:
            if isinstance(event, (TokenEvent, DoneEvent)) and event.text:
                sys.stdout.write(event.text)
                sys.stdout.flush()
        sys.stdout.write("\n")
        sys.stdout.flush()
        if args.stats:
            print(format_summary(generation.summary, runtime, config), file=sys.stderr)
    return 0
