"""What one generation request can say, and the one home of the names and limits it uses.

A request carries everything that varies per request (drafter, K or a named draft policy, p_min,
verification, sampling, stops, length); the engine makes the request's draft policy from it when
the request is checked (Engine.check, prepared.py), so nothing outside the engine ever swaps a drafter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable, Sequence

from specllama.decoding.cancel import CancelHandle
from specllama.decoding.constraint import Constraint
from specllama.decoding.limits import AUTO, K_MAX, SettingError, draft_length, number, whole  # noqa: F401 (K_MAX: its users import it from here)
from specllama.decoding.sampling import SamplingParams
from specllama.errors import SpecllamaError

# Where drafts come from: "auto" picks per step between the suffix drafter and the draft model
# (policy/source_choice.py), "suffix" looks the text's end up in what was seen before, "mtp" is the target's
# own multi-token-prediction layer (a GGUF with nextn layers), "none" is plain decoding.
DRAFTERS = ("auto", "suffix", "model", "mtp", "none")
DRAFTER_ALIASES = {"lookup": "suffix"}  # prompt lookup was absorbed by the suffix drafter
VERIFY_MODES = ("causal", "stairs")
K_AUTO_MAX = 8  # the longest draft -k auto considers: acceptance that far out rarely pays for itself
# ... except inside a near-certain copy (an answer that returns a file it was given): there the
# suffix drafter's draft may run as far as its match reaches, up to this, and the cost model cuts it
# where it pays. A batch of 64 rows costs about what prefill does (~80-90 tok/s on 2 cores, against
# one token per ~37 ms step), and llama-server's --spec-default drafts 48-64 tokens on the same turns.
# 63, not 64: with the token it verifies after them that is 64 rows, a whole block of llama.cpp's
# kernels; a 65th row cost 10 % more here (bench/measured/vm-20261125-verify-rows).
K_COPY_MAX = 63
PARALLEL_MAX = 64  # the most prompts --parallel may decode together
# --parallel auto allocates this many cache sequences (--ctx tokens each: 16 x 4096 is 1.9 GB of
# f16 cache for the 1.5B target, touched only as far as prompts fill it) and the cost model picks
# how many to use. Measured here (`specllama costs --parallel`, registry Q4_K_M target, 2 threads):
# N tokens in one decode cost T(N)/T(1) = 1.53 (N=2), 2.31 (4), 5.0 (8, a dip), 6.1 (16), 15.4
# (64): 16 prompts give 2.6x one at a time, 64 give 4.2x.
PARALLEL_AUTO_MAX = 16


@dataclass(frozen=True)
class GenerationConfig:
    max_tokens: int = 512
    sampling: SamplingParams = field(default_factory=SamplingParams)
    drafter: str = "auto"
    k: int | str = AUTO  # draft length, or "auto": chosen each step from the machine's costs
    p_min: float = 0.0  # the model drafter stops a draft when its top probability falls below this
    stop: tuple[str, ...] = ()
    verify: str = "causal"
    policy: str = ""  # a registered draft policy by name (decoding/policy/registry.py); "": the drafter's and K's
    constraint: Constraint | None = None  # what the output must match (constraint.py); None: free text
    logprobs: int | None = None  # each token's logprob and this many alternatives (0-20); None: none

    def __post_init__(self) -> None:
        object.__setattr__(self, "drafter", drafter_name(self.drafter))  # old names (chat.toml, scripts) still work
        if self.drafter not in DRAFTERS:
            raise SpecllamaError(f"unknown drafter '{self.drafter}': choose one of {', '.join(DRAFTERS)}")
        if self.verify not in VERIFY_MODES:
            raise SpecllamaError(f"unknown verification '{self.verify}': choose one of {', '.join(VERIFY_MODES)}")
        draft_length(self.k)
        if whole("max_tokens", self.max_tokens) < 1:
            raise SettingError("max_tokens", f"max tokens must be at least 1, got {self.max_tokens}")
        if not 0.0 <= number("p_min", self.p_min) < 1.0:
            raise SettingError("p_min", f"p_min must be in [0, 1), got {self.p_min}")

    @property
    def fixed_k(self) -> int | None:
        """The draft length a fixed-K request asks for; None under -k auto (the policy chooses each
        step). The one place that reads `k == AUTO`: the policy registry, the grammar's room and
        bench's prediction ask this."""
        return None if self.k == AUTO else int(self.k)

    @property
    def drafts(self) -> bool:
        """Whether this request drafts at all (plain decoding is the drafter none, or K = 0)."""
        return self.drafter != "none" and self.k != 0


@dataclass
class Request:
    """One prompt to generate from, with its settings; `tag` names its events in run_many, and
    `cancel` stops it from any thread (cancel.py)."""

    prompt: Sequence[int]
    config: GenerationConfig
    tag: Hashable = None
    cancel: CancelHandle = field(default_factory=CancelHandle)


def drafter_name(name: str) -> str:
    """The drafter a name means: itself, or what an old name became ("lookup" -> "suffix")."""
    return DRAFTER_ALIASES.get(name, name)
