"""What the user can change while chatting, and how each key press changes it.

Pure data: the app turns these into engine calls, the tests check the steps without a terminal.
A change reaches the engine with the next answer (the engine fixes K, the drafter's role and
sampling when an answer starts); switching the drafter never reloads a model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from specllama.decoding.engine import GenerationConfig
from specllama.decoding.request import DRAFTERS, K_MAX, drafter_name
from specllama.decoding.sampling import SamplingParams
from specllama.errors import SpecllamaError

TEMPERATURE_STEP, TEMPERATURE_MAX = 0.1, 2.0
P_MIN_STEP, P_MIN_MAX = 0.05, 0.95
SAVED_FIELDS = ("system", "drafter", "k", "temperature", "top_k", "top_p", "min_p", "p_min", "seed",
                "max_tokens", "stop", "verify")


@dataclass(frozen=True)
class ChatSettings:
    drafter: str = "auto"
    k: int | str = "auto"  # draft length, or "auto": the engine picks K at every step
    temperature: float = 0.0
    p_min: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int | None = None
    max_tokens: int = 512
    stop: tuple[str, ...] = ()
    verify: str = "causal"
    system: str | None = None
    # --policy: a registered draft policy by name (""; the drafter's and K's own). The command line's
    # alone: not saved with a conversation or chat.toml (a policy is an experiment, not a habit).
    policy: str = ""
    sampling: SamplingParams = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Values also come from chat.toml and saved conversations, typed by hand or by an older
        # version: a wrong type is refused here as one line, not met as a traceback mid-answer.
        _check_types(self)
        # Built (and so validated) once: a bad --temp fails before any model is loaded.
        object.__setattr__(self, "sampling", SamplingParams(
            temperature=self.temperature, top_k=self.top_k, top_p=self.top_p, min_p=self.min_p, seed=self.seed))
        self.generation_config()  # the engine's own checks (drafter, K, verify, max_tokens, p_min)

    def as_dict(self) -> dict:
        """What a saved conversation or the user's defaults keep (plain JSON / TOML values)."""
        values = {name: getattr(self, name) for name in SAVED_FIELDS}
        values["stop"] = list(self.stop)
        return values

    @classmethod
    def from_dict(cls, values: dict, base: ChatSettings | None = None) -> ChatSettings:
        """`base` with the known fields of `values` (unknown ones, from a newer version, ignored).
        Raises SpecllamaError for a value out of range, like the command line does."""
        known = {name: values[name] for name in SAVED_FIELDS if name in values}
        if "drafter" in known:  # defaults saved before 'lookup' became the suffix drafter
            known["drafter"] = drafter_name(known["drafter"])
        if "stop" in known:
            if not isinstance(known["stop"], (list, tuple)):
                raise SpecllamaError(f"stop must be a list of strings, got {known['stop']!r}")
            known["stop"] = tuple(known["stop"])
        return replace(base or cls(), **known)

    @property
    def effective_k(self) -> int | str:
        # With no drafter nothing is proposed; saying K = 0 keeps the stats honest.
        return 0 if self.drafter == "none" else self.k

    def generation_config(self) -> GenerationConfig:
        return GenerationConfig(max_tokens=self.max_tokens, sampling=self.sampling, drafter=self.drafter,
                                k=self.effective_k, p_min=self.p_min, stop=self.stop, verify=self.verify,
                                policy=self.policy)

    # --- one key press each ------------------------------------------------------------------

    def next_drafter(self, available: tuple[str, ...] = DRAFTERS) -> ChatSettings:
        order = [d for d in DRAFTERS if d in available]
        at = order.index(self.drafter) if self.drafter in order else -1
        return replace(self, drafter=order[(at + 1) % len(order)])

    def step_k(self, delta: int) -> ChatSettings:
        """K runs auto, 1, 2, ... K_MAX: "auto" sits below 1."""
        if self.k == "auto":
            return replace(self, k=1) if delta > 0 else self
        k = self.k + delta
        if k < 1:
            return replace(self, k="auto")
        return replace(self, k=min(K_MAX, k))

    def step_temperature(self, steps: int) -> ChatSettings:
        value = round(self.temperature + steps * TEMPERATURE_STEP, 2)
        return replace(self, temperature=min(TEMPERATURE_MAX, max(0.0, value)))

    def step_p_min(self, steps: int) -> ChatSettings:
        value = round(self.p_min + steps * P_MIN_STEP, 2)
        return replace(self, p_min=min(P_MIN_MAX, max(0.0, value)))


def _check_types(settings: ChatSettings) -> None:
    def refuse(name: str, wanted: str) -> None:
        raise SpecllamaError(f"{name} must be {wanted}, got {getattr(settings, name)!r}")

    # (numbers, K and their ranges: the settings types' own checks, decoding/limits.py)
    if not isinstance(settings.drafter, str) or not isinstance(settings.verify, str):
        refuse("drafter" if not isinstance(settings.drafter, str) else "verify", "a name")
    if settings.system is not None and not isinstance(settings.system, str):
        refuse("system", "text")
    if not all(isinstance(stop, str) for stop in settings.stop):
        refuse("stop", "a list of strings")
