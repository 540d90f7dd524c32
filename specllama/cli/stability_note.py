"""The one-line note that greedy text from several prompts per decode can differ from one at a time.

Batched decoding sums a row's arithmetic in another order than a lone one (design.md, "Numerics"),
so where two tokens nearly tie, greedy output at --parallel N > 1 can take the other one: a user
comparing runs would think something broke. `--exact` keeps every row's logits independent of the
batch (tests/real/test_real_exact.py checks the texts at any --parallel), so the note points to it.
"""

from __future__ import annotations

NOTE = ("note: {n} prompts share each decode, so greedy text can differ from --parallel 1 where two "
        "tokens nearly tie (batched sums round differently); --exact gives the same text at any --parallel")


def parallel_text_note(most_at_once: int, *, greedy: bool, exact: bool) -> str | None:
    """The note, or None when it cannot happen: one prompt at a time, sampling (its text depends on
    the seed anyway), or exact mode."""
    if most_at_once <= 1 or not greedy or exact:
        return None
    return NOTE.format(n=f"up to {most_at_once}")
