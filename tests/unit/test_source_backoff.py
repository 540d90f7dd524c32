"""A decoding source whose tries keep losing waits ever longer before the next, never forever
(decoding/policy/source_backoff.py); one unlucky try of a source that pays is not a loss."""

from __future__ import annotations

from specllama.decoding.policy.source_backoff import FIRST_WAIT, MAX_WAIT, SourceBackoff

T1 = 0.1


def lose(backoff: SourceBackoff, now: int) -> None:
    backoff.tried("mtp", 1, 2, 3 * T1)  # 2 tokens in three plain steps' time: even all accepted it lost
    backoff.judge(T1, now)


def test_waits_double_with_each_loss_in_a_row_up_to_a_limit():
    backoff, now, waits = SourceBackoff(), 0, []
    for _ in range(12):
        lose(backoff, now)
        start = now
        while "mtp" in backoff.waiting(now):
            now += 1
        waits.append(now - start)
    assert waits[:3] == [FIRST_WAIT, 2 * FIRST_WAIT, 4 * FIRST_WAIT]
    assert max(waits) == MAX_WAIT == waits[-1]  # never forever: one try per MAX_WAIT steps


def test_tries_before_t1_is_known_are_judged_when_it_is():
    backoff = SourceBackoff()
    backoff.tried("mtp", 1, 2, 3 * T1)
    backoff.judge(None, 2)
    assert not backoff.waiting(2)
    backoff.judge(T1, 3)
    assert backoff.waiting(3) == {"mtp"} and backoff.losses("mtp") == 1


def test_one_unlucky_try_of_a_source_that_pays_is_not_a_loss_and_a_win_ends_a_streak():
    backoff = SourceBackoff()
    for now in range(3):
        backoff.tried("mtp", 4, 5, 2 * T1)  # 5 tokens in two plain steps
        backoff.judge(T1, now)
    backoff.tried("mtp", 4, 1, 2 * T1)  # its first draft token rejected
    backoff.judge(T1, 3)
    assert not backoff.waiting(3) and backoff.losses("mtp") == 0
    lose(backoff, 4)
    lose(backoff, 5)
    assert backoff.waiting(5) and backoff.losses("mtp") >= 1
    for _ in range(3):
        backoff.tried("mtp", 8, 9, 2 * T1)
        backoff.judge(T1, 6)
    assert not backoff.waiting(6) and backoff.losses("mtp") == 0
