"""A prompt's prefill, decoded a chunk at a time between the engine's steps.

Why chunks between steps: a server decodes several requests at once, and a prompt decoded in one go
holds every other request's stream still until it is done. On 2 CPU cores a 10k-token prompt takes
minutes (49-86 tokens/s at 6k-2k tokens of context), and an agent sending its whole repository froze
the other conversations for all of that. Now each engine loop decodes prompt chunks, the oldest
waiting prompt's first, until PREFILL_CHUNK tokens are in (several short prompts arriving together
are all prefilled and then step together, as before), then one step of the requests already
generating: their streams go on at a token every chunk, and a request cancelled mid-prompt (its
client left) stops within one chunk.

Why 256 tokens: a chunk takes 2.4 s at an empty cache and 5.2 s at 6k tokens of context here, half
of llama.cpp's 512-token micro-batch, for prompt throughput within 3 % of it (chunks of
64/128/256/512 tokens at a cache fill of 0, 2k and 6k: 101/108/107/110, 76/84/86/85 and
41/49/49/50 tokens/s; bench/measured/vm-20261126-prefill-chunks). Chunks are cut at the same
places whatever else the engine is doing (from the reused prefix, every PREFILL_CHUNK tokens), so a
prompt's cache holds the same bits alone or beside others: measured there, cutting a prompt
differently changes the next logits by up to 0.5 once a piece is under ~64 rows (exact mode's
promise that the text does not depend on N rests on this).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from specllama.decoding.cost.online import StepCosts
from specllama.decoding.target import DecodeTarget

PREFILL_CHUNK = 256


@dataclass
class Prefill:
    """What of a slot's prompt is still to be decoded: `rest` from `done` on (the prompt after the
    prefix its cache already held, less the last token, whose logits start the first step)."""
    rest: list[int]
    done: int = 0

    @property
    def finished(self) -> bool:
        return self.done >= len(self.rest)

    def advance(self, target: DecodeTarget, seq: int, costs: StepCosts, clock: Callable[[], float]) -> int:
        """Decode the next chunk into sequence `seq` (its time feeds the cost estimate: a prompt row
        bounds a big verify batch's, cost/online.py); returns how many tokens it held."""
        piece = self.rest[self.done:self.done + min(PREFILL_CHUNK, target.n_batch)]
        if piece:
            start = clock()
            target.decode(piece, logits="none", seq=seq)
            costs.record_prefill(len(piece), clock() - start)
            self.done += len(piece)
        return len(piece)
