"""One decision from what was typed to what runs: `resolve(intent, registry, cache) -> Resolved`.

Pure: it reads the Intent, the registry and what the model cache answers (which cached draft fits
a target named alone), and returns the load options, the generation settings, the seed and the
status lines it wants said. It prints nothing and changes nothing; every command calls it once.
The cache is asked only when a target is named alone with `--drafter model` (that answer opens
GGUF headers); tests pass a stand-in.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Protocol

from specllama.cli.intent import Intent
from specllama.decoding.request import DRAFTERS, GenerationConfig
from specllama.decoding.sampling import SamplingParams
from specllama.errors import SpecllamaError, UsageError
from specllama.models.registry import Registry
from specllama.runtime.notices import Notice
from specllama.runtime.options import LoadOptions, model_refs

RANDOM_SEED = -1  # as in llama.cpp: --seed -1 picks one
ALL_DRAFTERS = ("chat", "serve")  # commands whose requests may name any drafter once loaded


class ModelCache(Protocol):
    def draft_for(self, target: str, registry: Registry) -> str | None:
        """The registry name of a cached draft that can serve `target`, or None."""


class CachedDrafts:
    """The real cache: the smallest cached registry model that may draft and passes the tokenizer
    check from the headers (models/draft_pick.py); nothing is downloaded."""

    def draft_for(self, target: str, registry: Registry) -> str | None:
        from specllama.models.draft_pick import pick_draft

        return pick_draft(target, registry)


@dataclass(frozen=True)
class Resolved:
    load: LoadOptions
    # What requests use unless they say otherwise (drafter, K, policy, p_min, verification, sampling,
    # stops), checked once: the engine's own settings type, not a copy of its fields.
    settings: GenerationConfig
    max_tokens: int | None  # None: until the context is full (serve); settings.max_tokens then a placeholder
    seed_was_random: bool  # --seed -1: the seed was chosen here, and is worth showing
    messages: tuple[Notice, ...]
    # The registry this was resolved against, which loading then uses: one read per command.
    registry: Registry | None = field(default=None, compare=False, repr=False)

    def config(self, max_tokens: int | None = None) -> GenerationConfig:
        """The generation settings; `max_tokens` where the resolved limit is "the context" (serve)."""
        limit = max_tokens if max_tokens is not None else self.max_tokens
        if limit is None:
            raise ValueError("no token limit resolved: pass the context size")
        return replace(self.settings, max_tokens=limit)


def resolve(intent: Intent, registry: Registry, cache: ModelCache, *, cores: int | None = None,
            rng: random.Random | None = None) -> Resolved:
    """`cores`: the cores this process may use (to warn about more threads); `rng` picks a random
    seed for --seed -1 (a system one by default)."""
    messages: list[Notice] = []
    if intent.policy:
        from specllama.decoding.policy import POLICIES  # here, not at import: --help stays instant

        if intent.policy not in POLICIES:
            known = ", ".join(sorted(POLICIES)) or "none is registered"
            raise UsageError(f"--policy {intent.policy}: no draft policy of that name (known: {known})")
    for flag, n in (("--threads", intent.threads), ("--threads-batch", intent.threads_batch)):
        if n is not None and cores is not None and n > cores:
            messages.append(Notice(f"threads {flag}", f"warning: {n} threads on {cores} available core(s) will run "
                                   f"slower than {cores} ({flag})"))
    drafter, draft = intent.drafter, intent.draft
    if intent.no_draft:
        drafter = "none"
    elif drafter == "model" and intent.target and not draft and not intent.pair:
        draft = cache.draft_for(intent.target, registry)
        if draft:
            messages.append(Notice("draft pick", f"--target without --draft: drafting with {draft} (cached, its "
                                                 "tokenizer matches the target's); pass --draft NAME|PATH to choose another"))
        else:
            drafter = "none"
            if intent.session_drafters is None and intent.command not in ALL_DRAFTERS + ("costs",):
                messages.append(Notice("no draft", "no draft model (--target without --draft or --pair, and no cached "
                                                   "draft that fits): decoding plainly; pass --draft NAME|PATH to speculate"))
    drafters = session_drafters(intent, drafter, draft)
    load = LoadOptions(pair=intent.pair, target=intent.target, draft=draft,
                       load_draft="model" in drafters or "auto" in drafters, load_mtp="mtp" in drafters,
                       mtp_if_present="auto" in drafters,
                       draft_if_pays="model" not in drafters and "auto" in drafters,
                       draft_corpus=intent.draft_corpus, n_ctx=intent.n_ctx, threads=intent.threads,
                       threads_batch=intent.threads_batch, gpu_layers=intent.gpu_layers, exact=intent.exact,
                       flash_attn=intent.flash_attn,
                       parallel=intent.parallel, draft_one_token_decodes=intent.draft_one_token_decodes,
                       verifiers=intent.session_verifiers or (intent.verify,))
    model_refs(load, registry)  # an unknown pair or model name fails here, before anything loads
    try:
        settings = GenerationConfig(sampling=sampling_for(intent, rng), drafter=drafter, k=intent.k, p_min=intent.p_min,
                                    stop=intent.stop, verify=intent.verify, policy=intent.policy,
                                    **({"max_tokens": intent.max_tokens} if intent.max_tokens is not None else {}))
    except SpecllamaError as e:  # typed on the command line: a usage mistake (exit 2)
        raise UsageError(str(e)) from None
    return Resolved(load, settings, intent.max_tokens, intent.seed == RANDOM_SEED, tuple(messages), registry)


def sampling_for(intent: Intent, rng: random.Random | None = None) -> SamplingParams:
    """The sampling settings, checked (also what `batch --server` sends its servers)."""
    try:
        return SamplingParams(temperature=intent.temp, top_k=intent.top_k, top_p=intent.top_p, min_p=intent.min_p,
                              seed=rng_seed(intent.seed, rng))
    except SpecllamaError as e:  # the values were typed on the command line: a usage mistake (exit 2)
        raise UsageError(str(e)) from None


def session_drafters(intent: Intent, drafter: str, draft: str | None) -> tuple[str, ...]:
    """Every drafter the session may use; the draft model is loaded only when "model" is among
    them, and under "auto" only where it pays (runtime/draft_load.py)."""
    if intent.session_drafters is not None:  # bench: its configurations'
        return intent.session_drafters
    if intent.command in ALL_DRAFTERS:
        # Asking for the model drafter or naming --draft loads the draft model, so a request (or the
        # chat's drafter key) can switch to it without a reload; else auto decides whether it pays.
        wants_model = drafter == "model" or bool(draft)
        # The MTP context follows every target decode (it takes the hidden states): only when asked for.
        return tuple(d for d in DRAFTERS if (d != "model" or wants_model) and (d != "mtp" or drafter == "mtp"))
    return (drafter,)


def rng_seed(seed: int | None, rng: random.Random | None = None) -> int | None:
    """-1 becomes a concrete random seed, so it can be shown (and the run repeated with it)."""
    if seed != RANDOM_SEED:
        return seed
    return (rng or random.SystemRandom()).randrange(2**32)
