"""The measured cost curve, cached per machine, model files and thread count.

Measuring T(n)/T(1) and the draft's cost takes several seconds, so `-k auto` does it once and keeps
the result in the cache directory. An entry is keyed by everything that changes the numbers: the
CPU, the thread counts, the llama.cpp build, and each model file's path, size and modification
time; change any of them and the curve is measured again.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from specllama.decoding.cost_curve import CostCurve, measure_cost_curve
from specllama.llama.backend import library_version
from specllama.llama.context import DecodeContext
from specllama.llama.machine import cpu_model
from specllama.models import store

MAX_N = 16  # one prompt: verify batches of up to 16 tokens (K <= 15)
MAX_N_PARALLEL = 64  # several prompts: N sequences x (K + 1) rows


def _file_identity(path: Path | None) -> dict | None:
    if path is None:
        return None
    stat = path.stat()
    return {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def cache_key(target: DecodeContext, draft: DecodeContext | None, max_n: int = MAX_N) -> dict:
    return _key(target, draft.model.path if draft is not None else None, max_n)


def _key(target: DecodeContext, draft_path: Path | None, max_n: int) -> dict:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "threads": target.n_threads,
        "threads_batch": target.n_threads_batch,
        "llama_cpp_python": library_version(),
        "target": _file_identity(target.model.path),
        "draft": _file_identity(draft_path),
        "max_n": max_n,
    }


def cached_curve(target: DecodeContext, draft_path: Path | None) -> CostCurve | None:
    """The curve cached for the target with this draft file, without loading the draft (the auto
    drafter decides from it whether the draft is worth loading at all); None when never measured."""
    for max_n in (MAX_N_PARALLEL, MAX_N):
        curve = load_cached(_key(target, draft_path, max_n))
        if curve is not None:
            return curve
    return None


def _entry_path(key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    return store.cache_dir() / "costs" / f"{digest}.json"


def cache_file(target: DecodeContext, draft: DecodeContext | None, max_n: int = MAX_N) -> Path:
    """Where the curve for these contexts is (or would be) cached."""
    return _entry_path(cache_key(target, draft, max_n))


def load_cached(key: dict) -> CostCurve | None:
    """The cached curve, or None for anything that is not exactly what `save` writes (a damaged or
    hand-edited file is measured again, never allowed to break every later run)."""
    path = _entry_path(key)
    try:
        entry = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != key:  # a hash collision or a hand-edited file
        return None
    return _valid_curve(entry.get("curve"), key["max_n"])


def _number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _valid_curve(raw: object, max_n: int) -> CostCurve | None:
    fields = {"t1_s", "ratios", "draft_ratio", "n_past", "reps"}
    if not isinstance(raw, dict) or set(raw) != fields:
        return None
    ratios, draft = raw["ratios"], raw["draft_ratio"]
    ok = (_number(raw["t1_s"]) and raw["t1_s"] > 0
          and isinstance(ratios, list) and len(ratios) == max_n and all(_number(r) and r > 0 for r in ratios)
          and (draft is None or (_number(draft) and draft >= 0))
          and isinstance(raw["n_past"], int) and raw["n_past"] >= 0
          and isinstance(raw["reps"], int) and raw["reps"] >= 1)
    return CostCurve(**raw) if ok else None


@contextmanager
def _measuring(key: dict) -> Iterator[None]:
    """One measurement per key at a time, across processes: two first runs at once would each time
    the CPU while the other loads it, and both store the skewed result."""
    try:
        import fcntl
    except ImportError:  # Windows: measure unlocked
        yield
        return
    lock = _entry_path(key).with_suffix(".lock")
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        f = open(lock, "a")
    except OSError:  # an unwritable cache (a file in its place, read-only): measure unlocked
        yield
        return
    with f:  # left in place: removing a lock file races with its next taker
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def save(key: dict, curve: CostCurve) -> None:
    """Keeps the curve when the cache can be written; only a cache, so a full disk or a read-only
    folder costs a measurement next time, never the run."""
    path = _entry_path(key)
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"key": key, "curve": curve.to_dict()}, indent=1))
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass


def cost_curve_for(target: DecodeContext, draft: DecodeContext | None, *, remeasure: bool = False,
                   on_measure: Callable[[], None] | None = None, max_n: int = MAX_N) -> tuple[CostCurve, bool]:
    """(curve, measured_now). Clears both contexts when it measures; on_measure is told first.
    A longer curve cached for the same models serves a shorter request."""
    if not remeasure and max_n < MAX_N_PARALLEL:
        longer = load_cached(cache_key(target, draft, MAX_N_PARALLEL))
        if longer is not None:
            return longer, False
    key = cache_key(target, draft, max_n)
    curve = None if remeasure else load_cached(key)
    if curve is not None:
        return curve, False
    with _measuring(key):
        # Another process may have measured while we waited for the lock: use its result.
        curve = None if remeasure else load_cached(key)
        if curve is not None:
            return curve, False
        if on_measure:
            on_measure()
        curve = measure_cost_curve(target, draft, max_n=max_n, reps=3)
        save(key, curve)
    return curve, True
