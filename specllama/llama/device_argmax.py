"""Greedy verification's argmax taken where the logits are computed (llama.cpp's backend sampling).

Greedy verification needs only each row's argmax (Slot.ids_only). Read from the host, every row's
152k logits (600 kB) are copied out of the GPU and scanned by numpy; with a greedy sampler chain
attached to the sequence (llama_set_sampler) llama.cpp takes the argmax in the decode's own graph and
only the token ids come back. Measured on the lent H100 (bench/measured/lent-20261127-verify-shapes):
a plain decode 1.795 against 1.986 ms, 10 % less; a 64-row verify batch no cheaper.

Off unless SPECLLAMA_BACKEND_ARGMAX=1: llama.cpp marks the API experimental, and it is measured there
only in that microbenchmark, not yet end to end. What it gives up: a row read this way is never seen,
so a damaged file's non-finite logits (llama/context.py's check) show only in the rows still read
(a grammar's, a sampled request's, logprobs).

A sequence holds the sampler only while its decodes ask for argmax ids: one that asks for logits rows
(sampling, a grammar, logprobs) has it taken off first, since llama.cpp then returns no logits for it.
Each change makes llama.cpp reserve its graph again (once per request that changes kind, not per step).
"""

from __future__ import annotations

import os

from specllama.errors import SpecllamaError

ENV = "SPECLLAMA_BACKEND_ARGMAX"


def wanted() -> bool:
    """Whether the environment asks for it (SPECLLAMA_BACKEND_ARGMAX=1). Read by runtime/options.py, which
    loads no llama.cpp (the command line's --help): so is this module until a context uses the class."""
    return os.environ.get(ENV, "") == "1"


class DeviceArgmax:
    """The greedy sampler chains of one llama.cpp context, one per sequence, attached on demand."""

    def __init__(self, ctx):
        from specllama.llama.backend import C  # here: importing this module loads no llama.cpp (wanted())

        self._C = C
        self._ctx = ctx
        self._chains: dict[int, object] = {}  # seq -> its chain, attached now
        self._retired: list = []  # chains taken off, freed once a decode ran without them

    @property
    def attached(self):
        """The sequences whose argmax is taken on the backend now (a view: `seq in`, `== {0}`)."""
        return self._chains.keys()

    def want(self, seq: int, device: bool) -> None:
        """Sequence `seq`'s next decode wants argmax ids from the device (True) or logits rows (False)."""
        if device and seq not in self.attached:
            # A new chain each time: llama.cpp sets a chain up for its backend once (it asserts on a second).
            chain = self._C.llama_sampler_chain_init(self._C.llama_sampler_chain_default_params())
            self._C.llama_sampler_chain_add(chain, self._C.llama_sampler_init_greedy())
            if not self._C.llama_set_sampler(self._ctx, seq, chain):
                self._C.llama_sampler_free(chain)
                raise SpecllamaError(f"llama.cpp cannot take the argmax on its backend here: unset {ENV}")
            self._chains[seq] = chain
        elif not device and seq in self.attached:
            self._C.llama_set_sampler(self._ctx, seq, None)
            # The last graph still names it: freed after the next decode has built one without it.
            self._retired.append(self._chains.pop(seq))

    def decoded(self) -> None:
        """A decode ran: the chains taken off before it are no longer named by any graph."""
        for chain in self._retired:
            self._C.llama_sampler_free(chain)
        self._retired.clear()

    def token(self, row: int) -> int:
        """The argmax id of the decode's `row`-th token (a batch position, as llama_get_logits_ith's)."""
        token = int(self._C.llama_get_sampled_token_ith(self._ctx, row))
        if token < 0:
            raise SpecllamaError(f"llama.cpp returned no argmax for row {row} of the decode")
        return token

    def close(self) -> None:
        """After the context is freed: the chains it held."""
        for chain in [*self._chains.values(), *self._retired]:
            self._C.llama_sampler_free(chain)
        self._chains.clear()
        self._retired.clear()
