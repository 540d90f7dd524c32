"""What the engine, the verifiers and the model drafter ask of a context: the one declared
interface between decoding/ and llama/. `llama.context.DecodeContext` is the real one; the tests'
fake backend (tests/fake_llm.FakeContext) is checked against this same protocol, so neither can
drift from what the engine uses."""

from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np


class DecodeModel(Protocol):
    n_vocab: int
    n_ctx_train: int
    eog_ids: list[int]  # every end-of-generation token (a draft is never sent past one: engine._draft)

    def is_eog(self, token: int) -> bool: ...


class DecodeTarget(Protocol):
    model: DecodeModel
    n_ctx: int  # what one sequence can hold
    n_seq_max: int
    n_batch: int
    exact: bool  # greedy output independent of the batch shape (the row limit applies)
    unified: bool  # one cache shared by every sequence (stairs verification's scratch sequences)
    llama_seconds: float  # time spent inside llama_decode so far (what --stats sets beside a step's)
    rollback_method: str  # how it drops a tail: "cells", "snapshots" or "checkpoints" (llama/rollback.py)

    def past(self, seq: int) -> int: ...

    def decode(self, tokens: Sequence[int], logits="last", seq: int = 0) -> np.ndarray: ...

    def decode_parts(self, parts) -> list[np.ndarray]: ...

    def rollback(self, n_past: int, seq: int = 0) -> None:
        """Keep the first n_past tokens (always possible; on a recurrent or hybrid model it may
        cost a decode: llama/rollback.py)."""

    def prepare_rollback(self, seq: int, n_tokens: int) -> None:
        """Up to n_tokens of the next decode of `seq` may be rolled back (a draft's verification)."""

    def checkpoint(self, seq: int = 0, *, keep: bool = True) -> None:
        """What `seq` holds now is worth coming back to (a prompt a later turn may share)."""

    def common_prefix(self, tokens: Sequence[int], seq: int = 0) -> int: ...

    def reuse_prefix(self, tokens: Sequence[int], seq: int = 0) -> int: ...

    def clear(self, seq: int | None = None) -> None: ...
