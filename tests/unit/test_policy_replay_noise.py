"""scripts/measure/policy_replay.py --noise: each decode's time times a lognormal factor, the same sequence for
every mode of a replay and another with --noise-seed. Why: on exact costs a cost model that reads two sizes a
hair apart as the curve's shape never meets the noise that makes them so (a blind prompt lost 10.8 % to it on
the 2-core VM), and one replay's figure is one draw of the learning's luck."""

from __future__ import annotations

import pytest

from tests.support.measure_scripts import fresh_script, isolate_replay


@pytest.fixture
def policy_replay(monkeypatch):
    isolate_replay(monkeypatch)
    yield from fresh_script(monkeypatch, "policy_replay")


def plain_seconds(replay, monkeypatch, noise: float, seed: int) -> list[float]:
    monkeypatch.setattr(replay, "NOISE", noise)
    monkeypatch.setattr(replay, "NOISE_SEED", seed)
    file = list(range(10, 40))
    items = [{"id": f"copy{n}", "prompt": [2, *file, 3], "answer": file[n:n + 20]} for n in range(3)]
    return [row["seconds"] for row in replay.prompt_runs({"items": items}, ["none", "none"])]


def test_noise_moves_every_decodes_time_the_same_way_in_each_mode(policy_replay, monkeypatch):
    exact = plain_seconds(policy_replay, monkeypatch, 0.0, 0)
    assert exact == pytest.approx([exact[0]] * 6)  # the same 21 decodes each, exactly priced
    noisy = plain_seconds(policy_replay, monkeypatch, 0.1, 1)
    assert noisy[:3] == noisy[3:]  # each mode draws the same sequence
    assert len(set(noisy[:3])) == 3 and noisy[:3] != pytest.approx(exact[:3], rel=1e-3)
    assert sum(noisy) == pytest.approx(sum(exact), rel=0.1)  # noise around the costs, not a bias
    assert plain_seconds(policy_replay, monkeypatch, 0.1, 2)[:3] != noisy[:3]  # another seed, another draw
    assert plain_seconds(policy_replay, monkeypatch, 0.1, 1) == noisy  # and the same seed the same
