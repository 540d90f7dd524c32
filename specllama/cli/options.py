"""Parsed command-line options -> the runtime's and the engine's configuration objects."""

from __future__ import annotations

import argparse

from specllama.decoding.engine import GenerationConfig
from specllama.decoding.runtime import LoadOptions
from specllama.decoding.sampling import SamplingParams


def load_options(args: argparse.Namespace) -> LoadOptions:
    drafter = "none" if getattr(args, "no_draft", False) else getattr(args, "drafter", "none")
    return LoadOptions(pair=args.pair, target=args.target, draft=args.draft, drafter=drafter,
                       p_min=getattr(args, "p_min", 0.0), n_ctx=args.n_ctx, threads=args.threads,
                       threads_batch=args.threads_batch, gpu_layers=args.gpu_layers,
                       verify=getattr(args, "verify", "causal"),
                       auto_k=getattr(args, "k", 0) == "auto" and drafter != "none")


def generation_config(args: argparse.Namespace) -> GenerationConfig:
    sampling = SamplingParams(temperature=args.temp, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p,
                              seed=args.seed)
    k = 0 if args.no_draft or args.drafter == "none" else args.k
    return GenerationConfig(max_tokens=args.max_tokens, sampling=sampling, k=k, stop=tuple(args.stop),
                            verify=args.verify)
