"""What the user typed, frozen: the options every command resolves the same way, and which of them
were typed rather than left at their defaults.

argparse parses; `Intent.from_args` copies the shared options out of the namespace once, and from
then on nothing writes to either: `resolve(intent, registry, cache)` (cli/resolve.py) decides.
Which options were typed matters where something else could set them (the chat's saved defaults
and a reopened conversation's settings): what was typed on the command line always wins. The
parser records it itself (arguments.track_given), so `--drafter auto` typed is "given" even though
it is the default.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Intent:
    command: str
    # models
    pair: str | None = None
    target: str | None = None
    draft: str | None = None
    n_ctx: int = 4096
    threads: int | None = None
    threads_batch: int | None = None
    gpu_layers: int | None = None
    exact: bool = False
    flash_attn: str = "auto"
    # speculation and sampling
    drafter: str = "auto"
    no_draft: bool = False
    draft_corpus: str | None = None
    k: int | str = "auto"
    p_min: float = 0.0
    verify: str = "causal"
    draft_one_token_decodes: bool = False
    policy: str = ""
    temp: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int | None = None
    max_tokens: int | None = 512  # None: serve's "until the context is full"
    stop: tuple[str, ...] = ()
    system: str | None = None
    parallel: int | str = 1  # batch's and serve's --parallel; 1 where a command has none
    # what a session loads for (bench: its configurations; None: the command's own rule, resolve.py)
    session_drafters: tuple[str, ...] | None = None
    session_verifiers: tuple[str, ...] | None = None  # bench: its configurations' (None: --verify's)
    quiet: bool = False
    verbose: bool = False
    given: frozenset[str] = field(default_factory=frozenset)  # dests typed on the command line

    @classmethod
    def from_args(cls, args: argparse.Namespace, **overrides) -> Intent:
        """The shared options of any command's namespace (a command without one gets the default)."""
        values = {}
        for name in cls.__dataclass_fields__:
            if name in ("command", "given", "session_drafters", "session_verifiers"):
                continue
            if hasattr(args, name):  # commands differ in which options they take
                values[name] = getattr(args, name)
        values["stop"] = tuple(values.get("stop") or ())
        parallel = values.get("parallel", 1)
        values["parallel"] = parallel if parallel == "auto" or isinstance(parallel, int) else 1  # bench's is a list
        return cls(command=getattr(args, "command", None) or "", given=frozenset(getattr(args, "_given", ())),
                   **{**values, **overrides})

    def typed(self, *names: str) -> bool:
        """Whether any of these options was typed on the command line."""
        return any(name in self.given for name in names)
