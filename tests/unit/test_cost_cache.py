"""The cost cache cannot hurt: a damaged entry is measured again, two first runs measure once, an
unwritable cache is skipped, an interrupted write leaves nothing behind."""

from __future__ import annotations

import json
import threading

import pytest

from specllama.decoding.cost.curve import CostCurve
from specllama.runtime import cost_store as cost_cache

KEY = {"cpu": "test", "max_n": 3}
GOOD = CostCurve(0.05, [1.0, 1.2, 1.3], 0.4, 256, 3)


@pytest.fixture
def fake_measurement(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path))
    monkeypatch.setattr(cost_cache, "cache_key", lambda target, draft, max_n=16: KEY if max_n == 16 else {**KEY, "max_n": max_n})
    measured = []

    def measure(target, draft, max_n, reps):
        measured.append(1)
        return GOOD

    monkeypatch.setattr(cost_cache, "measure_cost_curve", measure)
    return measured


@pytest.mark.parametrize("content", [
    [1, 2, 3], {"key": KEY, "curve": [1]}, {"key": KEY, "curve": {**GOOD.to_dict(), "ratios": "abc"}},
    {"key": KEY, "curve": {**GOOD.to_dict(), "ratios": [1.0, 1.2]}}, {"key": KEY, "curve": {**GOOD.to_dict(), "t1_s": None}},
    {"key": KEY, "curve": {**GOOD.to_dict(), "extra": 1}}, "just a string",
])
def test_a_cost_cache_of_the_wrong_shape_is_measured_again(fake_measurement, content):
    path = cost_cache.entry_path(KEY)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content))
    curve, measured_now = cost_cache.cost_curve_for(None, None)
    assert measured_now and curve == GOOD and fake_measurement == [1]
    assert cost_cache.cost_curve_for(None, None) == (GOOD, False)  # and stored properly for next time


def test_a_second_first_run_waits_for_the_measurement_and_reads_it(fake_measurement, monkeypatch):
    import fcntl

    first_look = threading.Event()
    real_load = cost_cache.load_cached

    def load(key):
        found = real_load(key)
        first_look.set()
        return found

    monkeypatch.setattr(cost_cache, "load_cached", load)
    lock = cost_cache.entry_path(KEY).with_suffix(".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    result = {}
    with open(lock, "a") as held:  # "the first run", measuring
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        second = threading.Thread(target=lambda: result.update(r=cost_cache.cost_curve_for(None, None)))
        second.start()
        assert first_look.wait(30)  # the second run found no curve and goes for the lock
        cost_cache.save(KEY, GOOD)  # the first run's result
        fcntl.flock(held.fileno(), fcntl.LOCK_UN)
    second.join(30)
    assert result["r"] == (GOOD, False) and fake_measurement == []


def test_an_unwritable_cost_cache_is_skipped(tmp_path, monkeypatch):
    from specllama.decoding.cost.curve import CostCurve
    from specllama.runtime import cost_store as cost_cache

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache should be")
    monkeypatch.setenv("SPECLLAMA_CACHE", str(blocker))
    monkeypatch.setattr(cost_cache, "entry_path", lambda key: blocker / "costs" / "x.json")
    curve = CostCurve(t1_s=0.05, ratios=[1.0, 1.5], draft_ratio=None, n_past=0, reps=1)
    cost_cache.save({"max_n": 2}, curve)  # skipped, not a traceback
    with cost_cache._measuring({"max_n": 2}):
        pass


def test_an_interrupted_cost_cache_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    from specllama.decoding.cost.curve import CostCurve
    from specllama.runtime import cost_store as cost_cache

    monkeypatch.setenv("SPECLLAMA_COSTS", str(tmp_path))

    def interrupted(src, dst):
        raise KeyboardInterrupt  # Ctrl-C between writing the entry and moving it into place

    monkeypatch.setattr(cost_cache.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cost_cache.save({"max_n": 2}, CostCurve(t1_s=0.05, ratios=[1.0, 1.5], draft_ratio=None, n_past=0, reps=1))
    assert list(tmp_path.iterdir()) == []
