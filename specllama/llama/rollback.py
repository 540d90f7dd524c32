"""How a model's cache drops its last tokens (a rejected draft, a conversation whose tail changed),
by architecture, and the state checkpoints for those that cannot do it in place.

An attention layer keeps one cache cell per token: dropping the tail is forgetting cells. A
recurrent layer (Mamba, RWKV) or a hybrid model's linear-attention / convolution layers (Qwen3.5,
LFM2, Granite 4-H, Nemotron-H) keep one running state per sequence, which has no earlier version
to go back to. llama.cpp offers two ways back, and this module picks one per model:

- cells: attention only; any tail is dropped in place (llama_memory_seq_rm).
- snapshots: the architectures llama.cpp lists in `llm_arch_supports_rs_rollback` keep the states
  after each of the last `n_rs_seq` tokens of a decode, so the tail of the LAST decode can be
  dropped once (a rejected draft right after its verification), up to n_rs_seq tokens.
- checkpoints: otherwise, and for anything the snapshots do not reach, a copy of the sequence's
  recurrent state (llama_state_seq_*_ext with PARTIAL_ONLY: the attention cells stay, they can be
  cut) taken before a speculative decode or after a prompt; going back restores the latest one at
  or before the point and decodes the tokens from there again. With no checkpoint early enough the
  sequence is decoded again from its start. Each way leaves the cache holding what a plain run's
  holds; only the cost differs (see `DecodeContext.rollback_seconds`).

`rollback_table()` lists every architecture this llama.cpp knows with its way back, read from the
library itself (docs/models.md is generated from it; a test keeps the two equal).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

from specllama.llama.backend import C

CELLS, SNAPSHOTS, CHECKPOINTS = "cells", "snapshots", "checkpoints"

# The longest tail a snapshot rollback must reach: decoding.request.K_MAX, the longest draft a
# user may ask for (a verification decodes [last] + K drafts and may drop all K). Kept here as a
# number (llama/ does not import decoding/); tests/integration/test_hybrid_rollback.py checks the two agree.
SNAPSHOT_DEPTH = 16

PARTIAL_ONLY = 1  # LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY: the recurrent part only; attention cells are cut instead
KEPT_CHECKPOINTS = 3  # per sequence, after prompts (a conversation's earlier turns); one more for the current step


def method_for(model, n_rs_seq: int) -> str:
    """The way back of a loaded model in a context made with n_rs_seq snapshots (llama.cpp sets
    it to 0 where the architecture has none)."""
    if not (C.llama_model_is_recurrent(model) or C.llama_model_is_hybrid(model)):
        return CELLS
    return SNAPSHOTS if n_rs_seq > 0 else CHECKPOINTS


def rollback_table() -> dict[str, str]:
    """Every architecture llama.cpp knows -> its way back. Read through llama.cpp's own (C++)
    predicates `llm_arch_is_recurrent`, `llm_arch_is_hybrid` and `llm_arch_supports_rs_rollback`,
    exported by libllama under their mangled names; empty where this build does not export them."""
    from llama_cpp.llama_cpp import _lib as lib

    try:
        name = lib._Z13llm_arch_name8llm_arch
        recurrent = lib._Z21llm_arch_is_recurrentRK8llm_arch
        hybrid = lib._Z18llm_arch_is_hybridRK8llm_arch
        snapshots = lib._Z29llm_arch_supports_rs_rollbackRK8llm_arch
    except AttributeError:
        return {}
    name.restype, name.argtypes = ctypes.c_char_p, [ctypes.c_int]
    for f in (recurrent, hybrid, snapshots):
        f.restype, f.argtypes = ctypes.c_bool, [ctypes.POINTER(ctypes.c_int)]
    table: dict[str, str] = {}
    for arch in range(1024):  # llm_arch is a plain enum from 0; unknown values are named "unknown"
        arch_name = name(arch).decode()
        if arch_name == "unknown":
            continue
        ref = ctypes.byref(ctypes.c_int(arch))
        if snapshots(ref):
            table[arch_name] = SNAPSHOTS
        elif recurrent(ref) or hybrid(ref):
            table[arch_name] = CHECKPOINTS
        else:
            table[arch_name] = CELLS
    return table


@dataclass
class Checkpoint:
    n_tokens: int  # the sequence held this many tokens when the state was copied
    data: ctypes.Array
    kept: bool  # taken after a prompt (kept for later turns), else for the current step only


@dataclass
class Checkpoints:
    """Each sequence's recurrent-state copies, newest last. A checkpoint stays valid while the
    sequence holds at least its tokens (tokens are only appended or cut): `cut` drops the rest."""

    by_seq: dict[int, list[Checkpoint]] = field(default_factory=dict)

    def add(self, seq: int, checkpoint: Checkpoint) -> None:
        mine = [c for c in self.by_seq.get(seq, []) if c.n_tokens != checkpoint.n_tokens and c.kept]
        mine.append(checkpoint)
        kept = [c for c in mine if c.kept]
        if len(kept) > KEPT_CHECKPOINTS:
            mine.remove(kept[0])
        self.by_seq[seq] = sorted(mine, key=lambda c: c.n_tokens)

    def best(self, seq: int, n_tokens: int) -> Checkpoint | None:
        """The latest checkpoint at or before n_tokens."""
        usable = [c for c in self.by_seq.get(seq, []) if c.n_tokens <= n_tokens]
        return usable[-1] if usable else None

    def cut(self, seq: int, n_tokens: int) -> None:
        """The sequence now holds n_tokens: checkpoints past that are of tokens it no longer holds."""
        self.by_seq[seq] = [c for c in self.by_seq.get(seq, []) if c.n_tokens <= n_tokens]

    def clear(self, seq: int | None = None) -> None:
        if seq is None:
            self.by_seq.clear()
        else:
            self.by_seq.pop(seq, None)

    def bytes(self) -> int:
        return sum(len(c.data) for cs in self.by_seq.values() for c in cs)


WAYS_BACK = {
    CELLS: "drops the tail's cache cells in place: free",
    SNAPSHOTS: f"state snapshots of the last decode's tokens (up to {SNAPSHOT_DEPTH}): a rejected draft is "
               "dropped in place; further back (a conversation's changed tail), as checkpoints",
    CHECKPOINTS: "a copy of the recurrent state before each verification and after each prompt; going back "
                 "restores one and decodes the tokens since again",
}


def rollback_markdown(table: dict[str, str] | None = None) -> str:
    """The table of docs/models.md: each way back, what it costs, and the architectures taking it
    (attention-only ones counted, not named: most of llama.cpp's list)."""
    table = rollback_table() if table is None else table
    lines = ["| way back | what going back costs | architectures |", "|---|---|---|"]
    for method in (SNAPSHOTS, CHECKPOINTS, CELLS):
        names = sorted(name for name, m in table.items() if m == method)
        shown = ", ".join(f"`{n}`" for n in names) if method != CELLS else f"every other one ({len(names)})"
        lines.append(f"| {method} | {WAYS_BACK[method]} | {shown} |")
    return "\n".join(lines)
