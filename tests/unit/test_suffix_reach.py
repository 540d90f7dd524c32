"""The suffix drafter skips a lookup that cannot find a match long enough to draft from, and bounds
the others (SuffixDrafter._reach): a match grows by at most the tokens added since the last lookup,
and only a new history or corpus document may hold one beyond that. It also follows the engine's
committed list by appending to its index (SuffixDrafter._catch_up). Neither may ever change a
proposal: checked against a drafter that looks up every step without a bound and compares the
whole text, on random texts with a small vocabulary (so that matches come and go), slots that
restart, rollbacks and documents joining the history, the text handed as a new list each step or
as one list grown in place (the engine's way). Pure Python, no model."""

from __future__ import annotations

import numpy as np
import pytest

from specllama.decoding.drafters import DraftRequest
from specllama.decoding.engine import GenerationConfig
from specllama.decoding.suffix_drafter import SuffixDrafter
from specllama.decoding.suffix_index import SuffixIndex

CONFIG = GenerationConfig(drafter="suffix", k="auto")


class EveryStep(SuffixDrafter):
    """The same drafter without the skip, the bound or the appending: the reference."""

    def _reach(self, seq: int, length: int) -> int | None:
        return None

    def _catch_up(self, seq, live, committed) -> None:
        live.sync_live(list(committed))


def ask(drafter: SuffixDrafter, seq: int, committed: list[int]):
    p = drafter.propose([DraftRequest(seq, committed, 16, CONFIG, np.random.default_rng(0))])[0]
    return list(p.tokens), list(p.confidence or ()), p.match_length if p.tokens else None


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("seed", range(8))
def test_skipping_never_changes_a_proposal(seed, in_place):
    rng = np.random.default_rng(seed)
    vocab = int(rng.integers(20, 400))  # few tokens: matches everywhere; many: most steps match nothing
    skipping, reference = SuffixDrafter(), EveryStep()
    texts = {0: [], 1: []}
    skipped = bounded = 0
    for step in range(600):
        seq = int(rng.integers(0, 2))
        roll = rng.random()
        if roll < 0.01:  # a new request on the slot
            texts[seq] = [int(t) for t in rng.integers(0, vocab, int(rng.integers(1, 40)))]
            for d in (skipping, reference):
                d.prefill(seq, texts[seq])
        elif roll < 0.02 and texts[seq]:  # a failed decode cuts the slot's text back
            cut = int(rng.integers(0, len(texts[seq])))
            if in_place:
                del texts[seq][cut:]
            else:
                texts[seq] = texts[seq][:cut]
            for d in (skipping, reference):
                d.rollback(seq, len(texts[seq]))
        elif roll < 0.03:  # another request's text joins the history
            doc = [int(t) for t in rng.integers(0, vocab, 30)] + texts[seq][-3:]
            for d in (skipping, reference):
                d.add_document(doc)
        # the text goes on: one token, or an accepted draft's few
        new = [int(t) for t in rng.integers(0, vocab, int(rng.choice([1, 1, 1, 3])))]
        if in_place:
            texts[seq].extend(new)
        else:
            texts[seq] = texts[seq] + new
        reach = skipping._reach(seq, len(texts[seq]))
        skipped += reach is not None and reach < skipping.min_match
        bounded += reach is not None and skipping.min_match <= reach < 64
        assert ask(skipping, seq, texts[seq]) == ask(reference, seq, list(texts[seq])), f"step {step}"
    assert skipped > 0 or vocab < 60  # the skip happened at all (with few tokens every token recurs)
    assert bounded > 0  # and bounded lookups


def test_a_token_never_seen_skips_the_next_lookup():
    drafter = SuffixDrafter()
    drafter.prefill(0, [5, 6, 7])
    assert ask(drafter, 0, [5, 6, 7, 8]) == ([], [], None)  # 8 is new: longest match 0
    calls = []
    index = drafter.live[0]
    original = SuffixIndex.longest_match
    index.longest_match = lambda *a, **k: calls.append(1) or original(index, *a, **k)
    assert ask(drafter, 0, [5, 6, 7, 8, 5]) == ([], [], None)  # at most a 1-token match: not looked up
    assert calls == []
    tokens, _, length = ask(drafter, 0, [5, 6, 7, 8, 5, 6])  # a 2-token match possible: looked up
    assert calls and tokens[:2] == [7, 8] and length == 2


def test_a_new_document_is_looked_up_at_once():
    drafter = SuffixDrafter()
    drafter.prefill(0, [5, 6, 7])
    ask(drafter, 0, [5, 6, 7, 8])  # longest match 0
    drafter.add_document([1, 8, 9, 10, 11])  # [8, 9] now occurs in the history
    tokens, _, length = ask(drafter, 0, [5, 6, 7, 8, 9])
    assert tokens[:2] == [10, 11] and length == 2
