"""`specllama run`: one completion streamed to stdout; statistics to stderr (or all as JSON).

The prompt comes the way llm and llama.cpp users expect: an argument, `-f FILE`, `-` for all of
stdin, and piped stdin joined before the argument (`git diff | specllama run "review this"`).
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specllama.cli.arguments import add_engine_options, add_model_options, add_status_options
from specllama.cli.output import check_stdout, emit
from specllama.errors import SpecllamaError, UsageError

if TYPE_CHECKING:
    from specllama.models.registry import Registry

HELP = "generate one completion for a prompt (chat template applied)"
DESCRIPTION = """Generate one completion and stream it to stdout.

  specllama run "Write a haiku about caches"
  git diff | specllama run "review this"          piped text comes first, then the argument
  specllama run -f question.txt --stats           statistics on stderr
  specllama run -m qwen2.5-coder-7b -n 128 "..."  llama.cpp's short options work

Piped or redirected stdin is read to its end: a script whose stdin is a pipe that stays open
without input should give `</dev/null`."""


class PromptSourceError(SpecllamaError):
    """The prompt cannot be read (missing file, not UTF-8)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("prompt", nargs="?",
                   help="the prompt; '-' reads the whole prompt from stdin; text piped to stdin is put before it "
                        "(default: none: give a prompt, -f FILE or pipe text)")
    p.add_argument("-f", "--file", metavar="FILE", dest="prompt_file",
                   help="read the prompt from FILE (UTF-8), for prompts too long for the command line (default: none)")
    p.add_argument("--system", help="a system message (default: none)")
    p.add_argument("--stats", action="store_const", const="short",
                   help="print a headline to stderr when done: tokens, time, tok/s, the speed against plain decoding "
                        "and the drafts accepted, then load time and the prompt's tokens and tok/s (default: off)")
    p.add_argument("--stats=full", action="store_const", const="full", dest="stats",
                   help="the same, then the detail: acceptance by position and source, where the time went, what "
                        "steps cost here (default: off)")
    p.add_argument("--show-thinking", action="store_true",
                   help="a thinking model's thinking (between its template's reasoning markers) to stderr as it comes "
                        "(default: off: only the answer, on stdout)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object on stdout when done: the text and the statistics (default: off, "
                        "the text is streamed)")
    add_model_options(p)
    add_engine_options(p)
    add_status_options(p)


def piped_stdin() -> str | None:
    """Text piped or redirected into stdin (a pipe or a file); None for a terminal, /dev/null, a
    closed stdin, or a stdin that is not a real file (an embedding program's stand-in)."""
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (AttributeError, OSError, ValueError):
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISREG(mode)):
        return None
    return _decode_stdin()


def _decode_stdin() -> str:
    try:
        return sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError:
        raise PromptSourceError("the text on stdin is not UTF-8") from None


def read_prompt(args: argparse.Namespace) -> str | None:
    """The prompt: the argument or -f FILE, after any text piped to stdin (llm's rule), or all of
    stdin for `-`. None when there is none at all (the caller prints the usage)."""
    if args.prompt_file is not None and args.prompt is not None:
        raise UsageError("give the prompt as an argument or with -f FILE, not both")
    if args.prompt == "-":
        return _decode_stdin()
    given = args.prompt
    if args.prompt_file is not None:
        path = Path(args.prompt_file)
        try:
            given = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise PromptSourceError(f"{path} is not UTF-8 text") from None
        except OSError as e:
            raise PromptSourceError(f"cannot read the prompt file {path}: {e.strerror or e}") from None
    piped = piped_stdin()
    if piped is None or not piped.strip():
        return given
    return piped.rstrip("\n") + ("\n\n" + given if given else "")


def model_name_hint(prompt: str, registry: Registry) -> str | None:
    """`specllama run qwen2.5-coder-7b` (Ollama's habit) names a model, not a question."""
    name = prompt.strip()
    if " " in name or not name:
        return None
    if name in registry.models:
        return (f"'{name}' is a model name, not a prompt; to use that model: "
                f"specllama run -m {name} \"your prompt\"")
    if name in registry.pairs:
        return f"'{name}' is a pair name, not a prompt; to use that pair: specllama run --pair {name} \"your prompt\""
    return None


def run(args: argparse.Namespace) -> int:
    # The runtime loads llama.cpp: imported here, so `--help` and completion never wait for it.
    from specllama.cli.options import resolved_for, status_lines
    from specllama.cli.progress import download_bar
    from specllama.cli.thinking_split import ThinkingSplit
    from specllama.decoding.events import DoneEvent, TokenEvent
    from specllama.runtime.loaded import open_runtime
    from specllama.runtime.stats import format_summary, summary_json

    check_stdout()
    status = status_lines(args)
    resolved = resolved_for(args, status)  # bad options fail before anything loads
    config = resolved.config()
    prompt_text = read_prompt(args)
    if prompt_text is None:
        raise UsageError("no prompt: give one as an argument, with -f FILE, or pipe text to stdin")
    if not prompt_text.strip():
        raise UsageError("the prompt is empty")
    if prompt_text == args.prompt and (hint := model_name_hint(args.prompt, resolved.registry)):
        raise UsageError(hint)
    with download_bar() as progress:
        session = open_runtime(resolved.load, resolved.registry, progress=progress, status=status)
    with session:
        generation = session.generate(session.prompt_tokens(prompt_text, args.system), config)
        answer = ThinkingSplit.of(session, prompt_text, args.system, show=args.show_thinking and not args.json)
        pieces: list[str] = []
        for event in generation:
            if isinstance(event, (TokenEvent, DoneEvent)):
                text = answer.feed(event.text, token=isinstance(event, TokenEvent),
                                   last=isinstance(event, DoneEvent) and (event.summary.finish_reason or "stop"))
                if not text:
                    continue
                if args.json:
                    pieces.append(text)  # one object at the end: a script parses it whole
                else:
                    emit(text)
        if args.json:
            document = {"text": "".join(pieces), **summary_json(generation.summary, session, config)}
            if answer.thinking:
                document["thinking"], document["thinking_tokens"] = answer.thinking, answer.thinking_tokens
            emit(json.dumps(document, ensure_ascii=False) + "\n")
        else:
            emit("\n")
        if args.stats:
            print(format_summary(generation.summary, session, config, full=args.stats == "full"), file=sys.stderr)
            if answer.thinking_tokens:
                print(f"thinking: {answer.thinking_tokens} of the {generation.summary.tokens} tokens", file=sys.stderr)
            if resolved.seed_was_random:
                print(f"seed {config.sampling.seed} (random, from --seed -1)", file=sys.stderr)
        elif (note := session.drafter_note(generation.summary)) is not None:
            status(note)
    return 0
