"""The command line's shared vocabulary: value validators, the option groups several commands take
(models, speculation and sampling), the help formatter and the exit-code table.

Imported by every command module and by main.py while the parser is built, so it stays light: no
llama.cpp, no runtime (`--help` and shell completion answer at once).
"""

from __future__ import annotations

import argparse

from specllama.decoding import limits
from specllama.decoding.request import DRAFTERS, PARALLEL_MAX, VERIFY_MODES, drafter_name
from specllama.errors import SpecllamaError
from specllama.llama import attention, thread_wait
from specllama.llama.exact_rows import EXACT_MAX_BATCH

# One table for every command; shown by --help and in the README.
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_CODES_TEXT = ("exit status: 0 done, 1 failed (a model, file, server or generation error), "
                   "2 usage (a wrong option or argument), 130 interrupted (Ctrl-C)")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs keep their line breaks; an option whose help does not already say
    its default gets "(default: X)" appended, so every option shows what it does when left out."""

    def _get_help_string(self, action: argparse.Action) -> str:
        help_text = action.help or ""
        if (action.option_strings and "default" not in help_text and action.default not in (None, False, [])
                and action.default is not argparse.SUPPRESS and not action.required):
            help_text += " (default: %(default)s)"
        return help_text


# --- value validators (argparse `type=`) -----------------------------------------------------------


def whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def at_least_one(text: str) -> int:
    n = whole_number(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def draft_length(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of tokens or 'auto', got {text!r}") from None
    try:
        return limits.draft_length(k)
    except SpecllamaError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def parallel_count(text: str) -> int | str:
    if text == "auto":
        return text
    n = at_least_one(text)
    if n > PARALLEL_MAX:
        raise argparse.ArgumentTypeError(f"at most {PARALLEL_MAX} prompts at once, got {n}")
    return n


def thread_count(text: str) -> int:
    """At least 1; more than this process may run on is allowed (the user may know better, e.g.
    under a changing affinity) but said once on stderr by resolve (cli/resolve.py), since
    oversubscription slows llama.cpp badly."""
    return at_least_one(text)


def probability_below_one(text: str) -> float:
    try:
        p = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.0 <= p < 1.0:
        raise argparse.ArgumentTypeError(f"must be at least 0 and below 1, got {text}")
    return p


def context_size(text: str) -> int:
    n = whole_number(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (the model's training context) or a positive size, got {n}")
    return n


def seed_value(text: str) -> int:
    n = whole_number(text)
    if n < -1:
        raise argparse.ArgumentTypeError(f"must be a seed >= 0, or -1 for a random one, got {n}")
    return n


# --- which options were typed ------------------------------------------------------------------------


class _Given:
    """Mixed into an option's action: records its dest in the namespace's `_given` when the option
    is on the command line (argparse calls an action only then; defaults are set without it)."""

    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, values, option_string)
        given = set(getattr(namespace, "_given", ()))
        given.add(self.dest)
        namespace._given = frozenset(given)


def track_given(parser: argparse.ArgumentParser) -> None:
    """Every option of `parser` records whether it was typed (cli/intent.py reads it): `--drafter
    auto` typed wins over a saved conversation's drafter although it is the default."""
    parser.set_defaults(_given=frozenset())
    for action in parser._actions:  # argparse keeps no public list; shtab reads the same one
        if action.option_strings and not isinstance(action, _Given) and action.dest != argparse.SUPPRESS:
            action.__class__ = type(f"Given{type(action).__name__}", (_Given, type(action)), {})


def add_status_options(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("-q", "--quiet", action="store_true",
                   help="no status lines on stderr (which drafter runs and why, context notes; errors still print; "
                        "default: off)")
    g.add_argument("-v", "--verbose", action="store_true",
                   help="every status line, each with the reasons behind it (default: one line per fact that matters)")


# --- option groups several commands share ----------------------------------------------------------
# Short aliases are llama.cpp's own names (-m, -md, -c, -t, -n, -ngl), which its users type by habit.

MODEL_REF = "a registry name, a GGUF path, or hf:OWNER/REPO:FILE_OR_QUANT"


def add_model_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("models")
    g.add_argument("--pair", help="a named target/draft pair from the registry (default: the registry's default pair, "
                                  "see `specllama models list`)")
    g.add_argument("-m", "--target", metavar="MODEL", help=f"the model that answers: {MODEL_REF} "
                                                            "(default: the pair's target)")
    g.add_argument("-md", "--draft", metavar="MODEL", help=f"the small model that drafts: {MODEL_REF} "
                                                           "(default: the pair's draft)")
    g.add_argument("-c", "--ctx", type=context_size, default=4096, dest="n_ctx", metavar="TOKENS",
                   help="context size in tokens (default %(default)s; 0 = the model's training context; never more than it)")
    g.add_argument("-t", "--threads", type=thread_count, metavar="N",
                   help="llama.cpp threads (default: all cores available)")
    g.add_argument("-tb", "--threads-batch", type=thread_count, metavar="N",
                   help="threads for batched decodes (default: --threads)")
    g.add_argument("--thread-wait", choices=thread_wait.LEVELS, default=None,
                   help="how llama.cpp's threads wait between the steps of a decode: spin (full speed while the "
                        "cores are free; far slower when other work takes one), sleep (~25%% slower, steady on a busy "
                        "machine) or auto (default: spin if the cores are idle as the command starts, else sleep; "
                        f"docs/install.md has the measured table). Also ${thread_wait.ENV}; your own "
                        "OMP_WAIT_POLICY/GOMP_SPINCOUNT win over both")
    g.add_argument("-ngl", "--gpu-layers", type=int, default=None, metavar="N",
                   help="layers offloaded to Metal/CUDA (default: all where llama.cpp can offload, else 0; -1 all)")
    g.add_argument("--exact", action="store_true",
                   help="output that does not depend on the batch shape (greedy, or sampled with --seed under suffix "
                        "drafts): identical to plain decoding with --exact whatever K is (no repacked weights, a Q8_0 "
                        f"KV cache, at most {EXACT_MAX_BATCH - 1} drafts a step: numerics of its own, so its text may "
                        "differ from a run without --exact at a near-tie; see docs/how-it-works.md; default: off)")
    g.add_argument("-fa", "--flash-attn", choices=attention.CHOICES, default="auto",
                   help="llama.cpp's flash-attention kernel: auto (default: off on a CPU for contexts of 8192 tokens and "
                        "more, where at a 4k fill a batch of drafts verified a third faster without it and one token "
                        "7 %% faster; llama.cpp's own choice for shorter contexts and on Metal/CUDA; docs/install.md "
                        "has the table), on, off. --exact turns it on")


def add_draft_shape_option(g) -> None:
    """A research switch for fast backends (run, chat, serve, batch and bench take it)."""
    g.add_argument("--draft-one-token-decodes", action="store_true",
                   help="every draft-model decode one token a sequence, a fixed shape a GPU backend can cache "
                        "(CUDA graphs), without timing it first (default: the draft times both ways over its "
                        "first steps and keeps the cheaper)")


def add_engine_options(p: argparse.ArgumentParser, *, max_tokens_default: int = 512) -> None:
    g = p.add_argument_group("speculation and sampling")
    g.add_argument("--drafter", choices=DRAFTERS, type=drafter_name, default="auto",
                   help="where drafts come from: auto (default: per step, the suffix drafter or the draft model, "
                        "whichever this machine's costs say pays, else none; the draft model is loaded only where "
                        "it can pay), suffix (earlier text: prompt, output, earlier prompts of the session, "
                        "--draft-corpus; 'lookup' is an alias), model (the draft model), none (plain decoding)")
    g.add_argument("--draft-corpus", metavar="FILE",
                   help="a UTF-8 text file the suffix drafter also drafts from, e.g. the code a question is about "
                        "(default: none)")
    g.add_argument("--no-draft", action="store_true", help="plain decoding, same as --drafter none (default: off)")
    g.add_argument("-k", type=draft_length, default="auto", dest="k", metavar="K|auto",
                   help="draft tokens proposed per step (K), or 'auto' (default): chosen each step from this "
                        "machine's measured costs and the running acceptance, 0 (plain decoding) when speculation "
                        "would lose")
    g.add_argument("--p-min", type=probability_below_one, default=0.0, metavar="P",
                   help="stop drafting early when the draft model's top probability falls below P "
                        "(default 0: always draft K)")
    g.add_argument("--verify", choices=VERIFY_MODES, default="causal",
                   help="verification scheme: causal (the drafts checked in one sequence; default) or stairs "
                        "(K+1 separate sequences, prefix plus the first i drafts: the same greedy text at "
                        "(K+1)(K+2)/2 tokens a step, a loss on a CPU)")
    add_draft_shape_option(g)
    g.add_argument("--policy", default="", metavar="NAME",
                   help="a draft policy registered by name (decoding/policy/registry.py) instead of the one "
                        "--drafter and -k choose (default: theirs)")
    g.add_argument("--temp", type=float, default=0.0, metavar="T", help="temperature (default 0: greedy)")
    g.add_argument("--top-k", type=int, default=0, metavar="N",
                   help="sample only from the N most likely tokens (default 0: no limit)")
    g.add_argument("--top-p", type=float, default=1.0, metavar="P",
                   help="sample only from the most likely tokens whose probabilities add up to P (default 1.0: no limit)")
    g.add_argument("--min-p", type=float, default=0.0, metavar="P",
                   help="drop tokens less likely than P times the most likely one (default 0: keep all)")
    g.add_argument("--seed", type=seed_value, metavar="N",
                   help="seed for sampling, reproducible when set, and the same text with suffix drafts as without "
                        "wherever the batch leaves the rows alone (always with --exact); -1 picks a random seed and "
                        "shows it (default: a random one, not shown)")
    g.add_argument("-n", "--max-tokens", type=at_least_one, default=max_tokens_default, metavar="N",
                   help=f"tokens to generate at most (default {max_tokens_default})")
    g.add_argument("--stop", action="append", default=[], metavar="TEXT",
                   help="stop when the output contains TEXT (repeatable; default: none)")
