"""Draft policies: per request, how many drafts from which source each step (base.py says how the
engine drives one; registry.py which one a request gets)."""

from specllama.decoding.policy.base import NO_DRAFT, Ask, DraftPolicy, EngineRecord, PolicyBase, PolicyKit
from specllama.decoding.policy.registry import POLICIES, default_policy, policy_for, register

__all__ = ["NO_DRAFT", "Ask", "DraftPolicy", "EngineRecord", "PolicyBase", "PolicyKit", "POLICIES", "default_policy",
           "policy_for", "register"]
