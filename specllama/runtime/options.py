"""What a session is asked to load: the models and the settings that need a reload to change.

Plain values only (no llama.cpp), so the command line builds them while `--help` stays instant.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specllama.decoding.request import AUTO, PARALLEL_AUTO_MAX, PARALLEL_MAX
from specllama.errors import SpecllamaError
from specllama.llama import device_argmax
from specllama.models.registry import Registry

# What exact mode changes, said wherever its output is compared: its greedy text is identical to
# plain decoding *in exact mode*, which can differ from a default run from the first token.
EXACT_MODE = "exact mode (Q8_0 KV cache, no repacked weights)"


@dataclass(frozen=True)
class LoadOptions:
    """How to load: which models, and the settings that need a reload to change."""

    pair: str | None = None
    target: str | None = None  # a registry name or a path; overrides the pair's
    draft: str | None = None
    load_draft: bool = True  # False: do not load the pair's draft model (plain decoding or suffix only)
    # True (--drafter auto): load the draft only where what is known of this machine's costs says
    # it pays by a margin, or when the user named it with --draft (runtime/draft_load.py).
    draft_if_pays: bool = False
    draft_corpus: str | None = None  # --draft-corpus FILE: text the suffix drafter also drafts from
    # --drafter mtp: load the target's multi-token-prediction layers, if its GGUF has them, as a
    # drafter (llama/mtp.py); off otherwise, since its context follows every target decode.
    load_mtp: bool = False
    # --drafter auto: load them too when the GGUF has them (auto weighs the head as a source of its
    # own, policy/source_choice.py), and say nothing when it has none.
    mtp_if_present: bool = False
    n_ctx: int = 4096
    threads: int | None = None
    threads_batch: int | None = None
    gpu_layers: int | None = None  # None: every layer where llama.cpp can offload (Metal, CUDA), else 0
    # The verification schemes requests may use: each declares the target context it needs
    # (decoding/verifiers.py), and the one loaded serves them all.
    verifiers: tuple[str, ...] = ("causal",)
    exact: bool = False  # greedy output independent of the batch shape (see llama/context.py)
    flash_attn: str = "auto"  # --flash-attn: auto (off on a CPU, llama.cpp's choice elsewhere; llama/attention.py), on, off
    # Every draft-model decode one token a sequence, untimed (decoding/catch_up.py's split; without
    # it the draft times both ways over its first steps and keeps the cheaper).
    draft_one_token_decodes: bool = False
    # Greedy rows' argmax taken on the backend (a research switch, SPECLLAMA_BACKEND_ARGMAX=1: llama/device_argmax.py).
    backend_argmax: bool = field(default_factory=device_argmax.wanted)
    parallel: int | str = 1  # the most prompts decoded together (batch, bench), or "auto": chosen from the costs
    prompts: int | None = None  # the prompts a job holds (batch): no more slots than that; None: unknown (serve)


def parallel_slots(parallel: int | str) -> int:
    """Cache sequences to allocate: --parallel N, or for "auto" the most the chooser considers."""
    if parallel == AUTO:
        return PARALLEL_AUTO_MAX
    if not isinstance(parallel, int) or not 1 <= parallel <= PARALLEL_MAX:
        raise SpecllamaError(f"--parallel must be 'auto' or between 1 and {PARALLEL_MAX}, got {parallel!r}")
    return parallel


def model_refs(opts: LoadOptions, registry: Registry) -> tuple[str, str | None]:
    """(target, draft or None) as the user asked: explicit models beat the pair's."""
    pair = registry.pair(opts.pair) if (opts.pair or not opts.target) else None
    target = opts.target or pair.target
    if not opts.load_draft:
        return target, None
    return target, opts.draft or (pair.draft if pair else None)
