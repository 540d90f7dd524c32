"""The measured cost curve, cached per machine, model files and thread count.

Measuring T(n)/T(1) and the draft's cost takes several seconds, so `-k auto` does it once and keeps
the result in the cache directory. An entry is keyed by everything that changes the numbers: the
CPU, the thread counts, the llama.cpp build, and each model file's path, size and modification
time; change any of them and the curve is measured again.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Callable

from specllama.models import store
from specllama.decoding.cost_curve import CostCurve, measure_cost_curve
from specllama.llama.context import DecodeContext
from specllama.llama.backend import library_version
from specllama.llama.machine import cpu_model

MAX_N = 16


def _file_identity(path: Path | None) -> dict | None:
    if path is None:
        return None
    stat = path.stat()
    return {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def cache_key(target: DecodeContext, draft: DecodeContext | None) -> dict:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "threads": target.n_threads,
        "threads_batch": target.n_threads_batch,
        "llama_cpp_python": library_version(),
        "target": _file_identity(target.model.path),
        "draft": _file_identity(draft.model.path) if draft is not None else None,
        "max_n": MAX_N,
    }


def _entry_path(key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    return store.cache_dir() / "costs" / f"{digest}.json"


def cache_file(target: DecodeContext, draft: DecodeContext | None) -> Path:
    """Where the curve for these contexts is (or would be) cached."""
    return _entry_path(cache_key(target, draft))


def load_cached(key: dict) -> CostCurve | None:
    path = _entry_path(key)
    try:
        entry = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if entry.get("key") != key:  # a hash collision or a hand-edited file: measure again
        return None
    try:
        return CostCurve(**entry["curve"])
    except (TypeError, KeyError):
        return None


def save(key: dict, curve: CostCurve) -> None:
    path = _entry_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    tmp.write_text(json.dumps({"key": key, "curve": curve.to_dict()}, indent=1))
    os.replace(tmp, path)


def cost_curve_for(target: DecodeContext, draft: DecodeContext | None, *, remeasure: bool = False,
                   on_measure: Callable[[], None] | None = None) -> tuple[CostCurve, bool]:
    """(curve, measured_now). Clears both contexts when it measures; on_measure is told first."""
    key = cache_key(target, draft)
    curve = None if remeasure else load_cached(key)
    if curve is not None:
        return curve, False
    if on_measure:
        on_measure()
    curve = measure_cost_curve(target, draft, max_n=MAX_N, reps=3)
    save(key, curve)
    return curve, True
