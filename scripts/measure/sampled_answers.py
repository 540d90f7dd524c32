"""Plain sampled answers by the target, with the row each answer token was drawn from: what the scripts that
study a real model's rows read (peaked_rows.py, coupling_odds.py). One place loads the models, samples each
prompt's answer as the engine does (drafter none) and keeps every step's logits row."""

from __future__ import annotations

import argparse
from typing import Iterator

import numpy as np


def arguments(doc: str, n: int = 64) -> argparse.Namespace:
    """The command line every such script takes: the prompts, the answers' length, temperature and seed."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompts", required=True, help="JSONL prompts, as bench reads them")
    p.add_argument("-n", type=int, default=n, help="tokens an answer (default %(default)s)")
    p.add_argument("--temp", type=float, default=0.7, help="the answers' temperature (default %(default)s)")
    p.add_argument("--seed", type=int, default=7)
    return p.parse_args()


def answers(args: argparse.Namespace, load_draft: bool = False) -> Iterator[tuple[object, list[int], list[int], list[np.ndarray]]]:
    """(runtime, prompt tokens, answer tokens, the answer tokens' rows) per prompt, the runtime open until the
    last one is read (with the draft model too when `load_draft`)."""
    from specllama.batch.prompts_file import read_prompts
    from specllama.decoding import target_rows
    from specllama.decoding.engine import GenerationConfig, TokenEvent
    from specllama.decoding.sampling import SamplingParams
    from specllama.runtime.loaded import open_runtime
    from specllama.runtime.options import LoadOptions

    kept: list[np.ndarray] = []
    lazy_init = target_rows.LazyProbabilities.__init__

    def keeping(self, logits, params):  # every step's rows, as the engine judges them
        kept.extend(np.array(r, dtype=np.float32) for r in logits)
        lazy_init(self, logits, params)

    target_rows.LazyProbabilities.__init__ = keeping
    try:
        with open_runtime(LoadOptions(load_draft=load_draft)) as runtime:
            for item in read_prompts(args.prompts).items:
                runtime.reset()
                kept.clear()
                prompt = runtime.prompt_tokens(item.prompt, item.system)
                config = GenerationConfig(max_tokens=args.n, drafter="none", k=0,
                                          sampling=SamplingParams(temperature=args.temp, seed=args.seed))
                answer = [e.id for e in runtime.generate(prompt, config) if isinstance(e, TokenEvent)]
                yield runtime, prompt, answer, kept[:len(answer)]
    finally:
        target_rows.LazyProbabilities.__init__ = lazy_init
