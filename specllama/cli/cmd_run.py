"""`specllama run`: one completion streamed to stdout; statistics to stderr."""

from __future__ import annotations

import argparse
import sys

from specllama.decoding.engine import TokenEvent
from specllama.cli.progress import download_bar
from specllama.decoding.runtime import Runtime
from specllama.cli.options import generation_config, load_options
from specllama.cli.summary_text import format_summary


def cmd_run(args: argparse.Namespace) -> int:
    config = generation_config(args)  # validate sampling options before loading anything
    with download_bar() as progress:
        runtime = Runtime(load_options(args), progress=progress, status=lambda m: print(m, file=sys.stderr))
    try:
        prompt = runtime.target_model.prompt_tokens(args.prompt, args.system)
        gen = runtime.engine.generate(prompt, config)
        while True:
            try:
                event = next(gen)
            except StopIteration as done:
                summary = done.value
                break
            if isinstance(event, TokenEvent) and event.text:
                sys.stdout.write(event.text)
                sys.stdout.flush()
        sys.stdout.write("\n")
        sys.stdout.flush()
        if args.stats:
            print(format_summary(summary, runtime, config), file=sys.stderr)
    finally:
        runtime.close()
    return 0
