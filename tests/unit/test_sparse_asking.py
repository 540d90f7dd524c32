"""Where asking a free drafter is a real share of a step (a GPU's 2 ms steps), a source that has sent
nothing yet on this text is asked at most every MAX_GAP-th step, backing off from the first ask that
sent nothing; once one of its drafts is sent it is asked every step (realised.py). On 2 CPU cores
asking is 0.3 % of a step and nothing changes."""

from __future__ import annotations

from specllama.decoding.realised import MAX_GAP, RealisedSpeed

GPU_T1, GPU_ASK = 0.002, 0.0002  # asking is 10 % of a step
CPU_T1, CPU_ASK = 0.036, 0.0001  # 0.3 %


def asks_over(realised: RealisedSpeed, steps: int, t1: float, t_ask: float) -> list[int]:
    """The steps (0..steps-1) on which the source is asked, each ask sending nothing, in the engine's
    order: the policy's ask, then its observe (a tick, then the step's outcome)."""
    asked = []
    for step in range(steps):
        ask = "suffix" not in realised.not_asked()
        realised.tick()
        if ask:
            asked.append(step)
            realised.observe_unsent("suffix", t_ask, t1)
    return asked


def test_where_asking_is_dear_a_source_that_sends_nothing_is_asked_ever_more_rarely():
    asked = asks_over(RealisedSpeed(), 20, GPU_T1, GPU_ASK)
    assert asked[:3] == [0, 2, 6]  # skips one step, then three
    gaps = {b - a for a, b in zip(asked, asked[1:])}
    assert max(gaps) == MAX_GAP and len(asked) <= 20 // MAX_GAP + 2


def test_where_asking_is_cheap_every_step_asks():
    assert asks_over(RealisedSpeed(), 20, CPU_T1, CPU_ASK) == list(range(20))


def test_once_a_draft_was_sent_the_source_is_asked_every_step():
    realised = RealisedSpeed()
    realised.observe("suffix", tokens=4, seconds=1.3 * GPU_T1, t1=GPU_T1, t_ask=GPU_ASK)  # a copy paid
    assert asks_over(realised, 20, GPU_T1, GPU_ASK) == list(range(20))


def test_a_draft_sent_while_backing_off_ends_the_wait():
    realised = RealisedSpeed()
    asks_over(realised, 5, GPU_T1, GPU_ASK)
    realised.observe("suffix", tokens=3, seconds=1.2 * GPU_T1, t1=GPU_T1, t_ask=GPU_ASK)
    assert "suffix" not in realised.not_asked()
