"""Which policy a request gets: by name (GenerationConfig.policy, a registered policy), else the
default for its drafter and K. Adding a policy is a file with a factory decorated by `register`
and its import in policy/__init__.py; K auto or fixed is GenerationConfig.fixed_k's to say."""

from __future__ import annotations

from typing import Callable

from specllama.decoding.policy.base import DraftPolicy, PolicyKit
from specllama.decoding.policy.confident_auto import ConfidentAuto
from specllama.decoding.policy.fixed import FixedLength, FixedSuffixThenModel
from specllama.decoding.policy.model_auto import ModelAuto
from specllama.decoding.policy.plain import Plain
from specllama.decoding.policy.source_choice import SourceChoice
from specllama.decoding.request import GenerationConfig
from specllama.errors import SpecllamaError

PolicyFactory = Callable[[GenerationConfig, PolicyKit], DraftPolicy]
POLICIES: dict[str, PolicyFactory] = {}


def register(name: str) -> Callable[[PolicyFactory], PolicyFactory]:
    """Make a policy choosable by name (`GenerationConfig(policy=name)`, `--policy name`)."""
    def add(factory: PolicyFactory) -> PolicyFactory:
        POLICIES[name] = factory
        return factory
    return add


def policy_for(config: GenerationConfig, kit: PolicyKit) -> DraftPolicy:
    """The request's policy; a SpecllamaError when it names a policy or drafter not available."""
    if config.policy:
        factory = POLICIES.get(config.policy)
        if factory is None:
            known = ", ".join(sorted(POLICIES)) or "none"
            raise SpecllamaError(f"unknown draft policy '{config.policy}' (known: {known})")
        return factory(config, kit)
    return default_policy(config, kit)


def default_policy(config: GenerationConfig, kit: PolicyKit) -> DraftPolicy:
    """What the drafter and K name: plain decoding, a fixed K, or -k auto in the drafter's way."""
    if not config.drafts:
        return Plain()
    if config.drafter == "auto":
        # The sources that cost a decode: the draft model, the target's MTP head (loaded under auto
        # whenever its GGUF has one), each weighed on its own record and cost.
        suffix = kit.drafter("suffix")
        decoding = [d for d in (kit.drafters.get("model"), kit.drafters.get("mtp")) if d is not None]
        if config.fixed_k is None:
            return SourceChoice(suffix, decoding, kit)
        # A fixed K keeps its rule of thumb: the draft model when one is loaded, else the MTP head.
        return FixedSuffixThenModel(suffix, decoding[0] if decoding else None, config.fixed_k)
    drafter = kit.drafter(config.drafter)
    if config.fixed_k is not None:
        return FixedLength(drafter, config.fixed_k)
    # A drafter with a confidence per token is cut on it; one without is sized on its record.
    return ConfidentAuto(drafter, kit) if drafter.confident else ModelAuto(drafter, kit)
