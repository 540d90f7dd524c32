"""How many cache sequences (slots) to allocate for --parallel, before the contexts are made.

A slot is a whole sequence of KV cache, allocated and cleared when the context is made, used or
not (llama/kv_memory.py), and for a recurrent or hybrid model its recurrent state, 1 + n_rs_seq
copies of it in the context and the checkpoints kept in host memory (runtime/loaded.py adds them).
So `--parallel auto` allocates no more slots than can ever be used:
  - at most one per prompt of the job (a batch of three prompts gets three, not sixteen);
  - at most what MEMORY_SHARE of the memory free at load time holds (host memory: with the layers
    offloaded to a GPU the cache lives in its memory, which this does not read);
  - at most PARALLEL_AUTO_MAX, the most the chooser considers.
Within those slots the engine still chooses, every step, how many prompts to decode together from
what steps cost (Engine.parallelism). A fixed `--parallel N` is also cut to the job's prompts (the
scheduler could not fill more), never to the memory bound: the user asked for N.
"""

from __future__ import annotations

from dataclasses import dataclass

from specllama.decoding.request import AUTO, PARALLEL_AUTO_MAX, PARALLEL_MAX
from specllama.errors import SpecllamaError
from specllama.llama.kv_memory import human_bytes

# The share of the memory free at load time that auto's slots may take: the rest is left to the
# compute buffers, the Python process and whatever else the machine runs.
MEMORY_SHARE = 0.5


@dataclass(frozen=True)
class SlotPlan:
    count: int  # cache sequences to allocate
    # Cache bytes one slot holds, target and draft model together: KV cells, and for a recurrent or
    # hybrid model its state with the snapshots and checkpoints kept of it; an MTP head's cells.
    kv_bytes: int
    limit: str  # what bound the count: "asked", "prompts", "memory", "most"

    def describe(self) -> str:
        """A clause for the status line: the slots, what bound them, what each costs."""
        why = {"asked": "as asked", "prompts": "one per prompt", "memory": f"what {MEMORY_SHARE:.0%} of the free memory holds",
               "most": f"the most auto considers ({PARALLEL_AUTO_MAX})"}[self.limit]
        return f"{self.count} slot(s), {why}, {human_bytes(self.kv_bytes)} of cache each"


def plan_slots(parallel: int | str, *, prompts: int | None, kv_bytes: int, available: int | None) -> SlotPlan:
    """`prompts`: how many the job holds (None: unknown, a server); `available`: free memory in
    bytes (None: unknown, no memory bound); `kv_bytes`: one slot's cache."""
    if parallel != AUTO:
        if not isinstance(parallel, int) or not 1 <= parallel <= PARALLEL_MAX:
            raise SpecllamaError(f"--parallel must be 'auto' or between 1 and {PARALLEL_MAX}, got {parallel!r}")
        if prompts is not None and prompts < parallel:
            return SlotPlan(max(1, prompts), kv_bytes, "prompts")
        return SlotPlan(parallel, kv_bytes, "asked")
    bounds = [(PARALLEL_AUTO_MAX, "most")]
    if prompts is not None:
        bounds.append((max(1, prompts), "prompts"))
    if available is not None and kv_bytes > 0:
        bounds.append((max(1, int(available * MEMORY_SHARE // kv_bytes)), "memory"))
    count, limit = min(bounds, key=lambda b: b[0])
    return SlotPlan(count, kv_bytes, limit)
