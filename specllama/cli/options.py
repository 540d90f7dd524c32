"""Parsed command-line options -> the runtime's load options and the engine's request settings.

The one place that maps flags to LoadOptions and GenerationConfig, for run, batch, chat, bench
and costs alike.
"""

from __future__ import annotations

import argparse
import random
import sys

from specllama.decoding.request import GenerationConfig
from specllama.decoding.sampling import SamplingParams
from specllama.errors import SpecllamaError, UsageError
from specllama.runtime import LoadOptions


def no_draft_named(args: argparse.Namespace) -> bool:
    """`--target X` alone, with the model drafter: no pair is consulted (an explicit target replaces
    it), so there is no draft model. That is a plain run the user asked for, not a mistake. (With
    auto, the suffix drafter still drafts: nothing to say.)"""
    return (getattr(args, "drafter", "none") == "model" and not getattr(args, "no_draft", False)
            and bool(args.target) and not args.draft and not args.pair)


def pick_draft_for_target(args: argparse.Namespace) -> None:
    """`--target X --drafter model` without --draft: a cached, compatible draft from the registry,
    said on stderr (nothing is downloaded). Done once; drafter_choice and load_options call it, so
    every command that reads the drafter sees the draft it picked."""
    if getattr(args, "draft_picked", None) is not None or not no_draft_named(args):
        return
    from specllama.models.draft_pick import pick_draft
    from specllama.models.registry import load_registry

    args.draft_picked = pick_draft(args.target, load_registry()) or ""
    if args.draft_picked:
        args.draft = args.draft_picked
        print(f"specllama: --target without --draft: drafting with {args.draft} (cached, its tokenizer matches the "
              "target's); pass --draft NAME|PATH to choose another", file=sys.stderr)


def drafter_choice(args: argparse.Namespace) -> str:
    pick_draft_for_target(args)
    if getattr(args, "no_draft", False) or no_draft_named(args):
        return "none"
    return getattr(args, "drafter", "none")


def load_options(args: argparse.Namespace, *, drafters: tuple[str, ...] | None = None,
                 stairs: bool | None = None) -> LoadOptions:
    """`drafters`: every drafter the session may use (default: the one chosen); the draft model is
    loaded only when the model drafter is among them."""
    pick_draft_for_target(args)
    if drafters is None and no_draft_named(args):
        print("specllama: no draft model (--target without --draft or --pair, and no cached draft that fits): "
              "decoding plainly; pass --draft NAME|PATH to speculate", file=sys.stderr)
    drafters = drafters or (drafter_choice(args),)
    corpus = getattr(args, "draft_corpus", None)
    if corpus:
        from specllama.decoding.suffix_drafter import read_corpus
        read_corpus(corpus)  # an unreadable corpus fails in one line before minutes of model loading
    # auto loads the draft only where it can pay (the runtime decides from what it knows of the costs).
    return LoadOptions(pair=args.pair, target=args.target, draft=args.draft,
                       load_draft="model" in drafters or "auto" in drafters,
                       draft_if_pays="model" not in drafters and "auto" in drafters,
                       draft_corpus=corpus,
                       n_ctx=args.n_ctx, threads=args.threads, threads_batch=args.threads_batch,
                       gpu_layers=args.gpu_layers, exact=getattr(args, "exact", False),
                       parallel=parallel_option(args),
                       stairs=getattr(args, "verify", "causal") == "stairs" if stairs is None else stairs)


def parallel_option(args: argparse.Namespace) -> int | str:
    """batch's --parallel N|auto; 1 for commands without it (bench's --parallel is a list of
    levels, which its own command turns into load options)."""
    value = getattr(args, "parallel", 1)
    return value if value == "auto" or isinstance(value, int) else 1


def sampling_params(args: argparse.Namespace) -> SamplingParams:
    """Also replaces a random seed request (-1) in `args` by the seed chosen, for --stats to show."""
    args.random_seed = args.seed == RANDOM_SEED
    args.seed = resolve_seed(args.seed)
    try:
        return SamplingParams(temperature=args.temp, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p,
                              seed=args.seed)
    except SpecllamaError as e:  # the values were typed on the command line: a usage mistake (exit 2)
        raise UsageError(str(e)) from None


RANDOM_SEED = -1  # as in llama.cpp: --seed -1 picks one


def resolve_seed(seed: int | None) -> int | None:
    """-1 becomes a concrete random seed, so it can be shown (and the run repeated with it)."""
    return random.SystemRandom().randrange(2**32) if seed == RANDOM_SEED else seed


def generation_config(args: argparse.Namespace) -> GenerationConfig:
    return GenerationConfig(max_tokens=args.max_tokens, sampling=sampling_params(args), drafter=drafter_choice(args),
                            k=args.k, p_min=args.p_min, stop=tuple(args.stop), verify=args.verify)
