"""The suffix drafter follows what a text renames in what it copies (decoding/suffix_renames.py): a
break that the text's next tokens show to be a substitution becomes a rule once two breaks agree, and
later copies write the new name where the source has the old, and find the source again after it."""

from __future__ import annotations

from specllama.decoding.drafters import DraftRequest
from specllama.decoding.suffix_drafter import SuffixDrafter
from specllama.decoding.suffix_renames import Renames, _rename

OLD, NEW, NEW2 = 100, 200, 201
# A function whose variable (token OLD) occurs five times, and the text that renames it.
SOURCE = [10, 11, OLD, 12, 13, 14, 15, OLD, 16, 17, 18, 19, OLD, 20, 21, 22, 23, OLD, 24, 25, 26, 27, OLD, 28, 29, 30]
PROMPT = [900, 901, 902] + SOURCE + [903]


def renamed(tokens, new=(NEW,)):
    out = []
    for t in tokens:
        out += list(new) if t == OLD else [t]
    return out


def test_a_break_is_a_rename_only_when_the_text_goes_on_as_the_copy_did():
    copy = [OLD, 1, 2, 3, 4]
    assert _rename(copy, [NEW, 1, 2, 3]) == ((OLD,), (NEW,))
    assert _rename(copy, [NEW, NEW2, 1, 2, 3]) == ((OLD,), (NEW, NEW2))  # a longer new name
    assert _rename([OLD, 7, 1, 2, 3], [NEW, 1, 2, 3]) == ((OLD, 7), (NEW,))  # a longer old one
    assert _rename(copy, [NEW, 1, 2]) is None  # not yet: RESYNC tokens must agree
    assert _rename(copy, [NEW, 5, 6, 7, 8]) is None  # the text went elsewhere


def test_a_rename_is_used_once_two_breaks_agree_and_dropped_once_wrong_as_often_as_right_in_drafts():
    renames = Renames()
    text = [0] * 10 + [NEW, 1, 2, 3]
    renames.broke(10, [OLD, 1, 2, 3, 4])
    renames.learn(text)
    assert renames.as_text([5, OLD, 6])[0] == [5, OLD, 6]  # seen once: a one-off edit looks the same
    renames.broke(10 + len(text), [OLD, 1, 2, 3, 4])
    assert renames.learn(text + text)  # a second break agrees: used from now on
    assert renames.as_text([5, OLD, 6]) == ([5, NEW, 6], [0, 1, 2], [None, (OLD,), None])
    assert renames.as_source([5, NEW, 6]) == [5, OLD, 6]
    renames.judged((OLD,), True)
    renames.judged((OLD,), False)
    assert renames.any_used  # right in a draft once, wrong once (beside the break it was read from)
    renames.judged((OLD,), False)
    assert not renames.any_used and renames.as_text([OLD]) == ([OLD], [0], [None])


def _walk(drafter: SuffixDrafter, answer: list[int]) -> dict[int, tuple]:
    """Each position's proposal as the text is committed token by token (as a plain run asks)."""
    drafter.prefill(0, PROMPT)
    out = {}
    for i in range(len(answer)):
        proposal = drafter.propose([DraftRequest(0, PROMPT + answer[:i], 16, None, None)])[0]
        out[i] = tuple(proposal.tokens)
    return out


def test_copies_write_the_new_name_after_two_occurrences_taught_it():
    answer = renamed(SOURCE)
    proposals = _walk(SuffixDrafter(), answer)
    occurrences = [i for i, t in enumerate(answer) if t == NEW]
    first, fourth = occurrences[0], occurrences[3]
    assert proposals[first][:1] == (OLD,)  # nothing known yet: the copy says the old name
    # Before the fourth occurrence the copy has the new name where the source has the old ...
    assert proposals[fourth][:3] == tuple(answer[fourth:fourth + 3])
    # ... and right after a new name it goes on with the source, read back through the rename.
    assert proposals[fourth + 1][:4] == tuple(answer[fourth + 1:fourth + 5])


def test_a_new_name_of_two_tokens_is_written_whole():
    answer = renamed(SOURCE, new=(NEW, NEW2))
    proposals = _walk(SuffixDrafter(), answer)
    fourth = [i for i, t in enumerate(answer) if t == NEW][3]
    assert proposals[fourth][:4] == tuple(answer[fourth:fourth + 4])


def test_a_plain_copy_learns_no_rename():
    drafter = SuffixDrafter()
    proposals = _walk(drafter, list(SOURCE))  # nothing breaks, nothing is learnt
    assert not drafter.renames or not drafter.renames[0].rules
    assert proposals[5][:4] == tuple(SOURCE[5:9])


def test_a_new_text_on_the_slot_forgets_the_last_ones_renames():
    drafter = SuffixDrafter()
    _walk(drafter, renamed(SOURCE))
    assert drafter.renames[0].any_used
    drafter.prefill(0, PROMPT)
    assert 0 not in drafter.renames


def test_a_copy_its_renames_helped_teaches_its_text_not_the_shared_calibration():
    """What a rename makes of a copy is this text's own fact: other texts' copies start from the
    calibration without it (fed it, prose after a rename drafted 8 tokens at 0.88 odds and lost)."""
    drafter = SuffixDrafter()
    _walk(drafter, renamed(SOURCE))
    shared = sum(sum(row) for row in drafter.calibrator.judged)
    own = sum(drafter.texts[0].judged.values())
    assert 0 < shared < own
    plain = SuffixDrafter()
    _walk(plain, list(SOURCE))
    assert sum(sum(row) for row in plain.calibrator.judged) == sum(plain.texts[0].judged.values())


def test_a_text_that_writes_the_old_name_again_renamed_nothing_and_is_not_taught_it_twice():
    renames = Renames()
    text = [0] * 10 + [NEW, 1, 2, 3]
    for at in (10, 10 + len(text)):
        renames.broke(at, [OLD, 1, 2, 3, 4])
    text = text + text
    assert renames.follow(text) and renames.any_used
    assert not renames.follow(text + [5]) and renames.any_used  # its old name nowhere since: kept
    renames.follow(text + [5, OLD, 6])  # the text wrote the old name itself: it was no rename
    assert not renames.any_used
    renames.broke(len(text) + 3, [OLD, 1, 2, 3, 4])
    renames.broke(len(text) + 10, [OLD, 1, 2, 3, 4])
    more = text + [5, OLD, 6] + [NEW, 1, 2, 3, 0, 0, 0] + [NEW, 1, 2, 3]
    renames.follow(more)
    assert not renames.any_used and not renames.rules  # that pair is not learnt again in this text
