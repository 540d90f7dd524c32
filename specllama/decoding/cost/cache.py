"""Decode costs kept per machine, model files and settings: the startup curve (`specllama costs`)
and what the engine's own steps taught (online.StepCosts.snapshot), so the next run starts from it.

An entry is keyed by everything that changes the numbers: the CPU, the thread counts and how the
threads wait (sleeping threads made one-token decodes ~25 % dearer and so batches look cheap:
llama/thread_wait.py), the llama.cpp build, where the layers run (GPU offload), the cache type
(exact mode), and each model file's path, size and modification time; change any of them and the
entry is not used. A curve that contradicts
itself (a batch of n rows dearer than n one-row decodes, as measured while another process held
the cores) is neither trusted nor cached.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Callable, Iterator

from specllama import dirs
from specllama.decoding.cost.curve import CostCurve, measure_cost_curve
from specllama.decoding.request import PARALLEL_MAX
from specllama.llama import thread_wait
from specllama.llama.backend import library_version
from specllama.llama.context import DecodeContext
from specllama.llama.machine import cpu_model

MAX_N = 16  # one prompt: verify batches of up to 16 tokens (K <= 15)
MAX_N_PARALLEL = PARALLEL_MAX  # several prompts: N sequences x (K + 1) rows, as many as --parallel's most


def _file_identity(path: Path | None) -> dict | None:
    if path is None:
        return None
    stat = path.stat()
    return {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def cache_key(target: DecodeContext, draft: DecodeContext | None, max_n: int = MAX_N) -> dict:
    return _key(target, draft.model.path if draft is not None else None, max_n)


def _key(target: DecodeContext, draft_path: Path | None, max_n: int) -> dict:
    return key_for(target.model.path, draft_path, threads=target.n_threads, threads_batch=target.n_threads_batch,
                   gpu_layers=getattr(target.model, "n_gpu_layers", 0), exact=bool(getattr(target, "exact", False)),
                   max_n=max_n)


def key_for(target_path: Path, draft_path: Path | None, *, threads: int, threads_batch: int, gpu_layers: int,
            exact: bool, max_n: int) -> dict:
    """The key from the settings themselves, before any context exists: the runtime reads what is
    known of the costs while it plans what to load (runtime/cost_store.py)."""
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "threads": threads,
        "threads_batch": threads_batch,
        "thread_wait": thread_wait.key(),
        "llama_cpp_python": library_version(),
        "gpu_layers": gpu_layers,
        "exact": exact,
        "target": _file_identity(target_path),
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
    return dirs.costs_dir() / f"{digest}.json"


def entry_path(key: dict) -> Path:
    """The file an entry of this key is (or would be) kept in."""
    return _entry_path(key)


def cache_file(target: DecodeContext, draft: DecodeContext | None, max_n: int = MAX_N) -> Path:
    """Where the curve for these contexts is (or would be) cached."""
    return _entry_path(cache_key(target, draft, max_n))


def load_cached(key: dict) -> CostCurve | None:
    """The cached curve, or None for anything that is not exactly what `save` writes (a damaged or
    hand-edited file is measured again, never allowed to break every later run)."""
    path = _entry_path(key)
    try:
        entry = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):  # RecursionError: arrays nested thousands deep
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
    return CostCurve(**raw) if ok and plausible(raw["ratios"]) else None


# A batch of n rows decodes the n rows' weights once instead of n times: it can cost about n
# one-row decodes (compute-bound, 2 cores: T(8)/T(1) 2.8-6.7) but not much more. A curve beyond
# this was timed while something else took the cores (seen: T(3)/T(1) 4.62 instead of 2.13).
IMPLAUSIBLE = 1.25


def plausible(ratios: list[float]) -> bool:
    """Whether T(n)/T(1) stays within what a batch can cost (IMPLAUSIBLE x n)."""
    return all(r <= IMPLAUSIBLE * n for n, r in enumerate(ratios, start=1))


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
        f = open(lock, "a")  # left in place: removing a lock file races with its next taker
    except OSError:  # an unwritable cache: measure unlocked (and the result is not kept)
        yield
        return
    with f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def save(key: dict, curve: CostCurve) -> None:
    if plausible(curve.ratios):
        _write(key, {"key": key, "curve": curve.to_dict()})


def _write(key: dict, entry: dict) -> None:
    """Write an entry atomically; a cache that cannot be written is skipped (it only saves time)."""
    path = _entry_path(key)
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(entry, indent=1))
        os.replace(tmp, path)
    except OSError:
        pass
    finally:  # also on Ctrl-C mid-write: no .tmp-PID file left behind (there were some)
        with suppress(OSError):
            tmp.unlink(missing_ok=True)


def learned_key(target: DecodeContext) -> dict:
    """Where what the engine's steps taught is kept: the target's costs do not depend on the draft,
    so the key is the target's; each draft file's cost is kept inside the entry by its identity."""
    return {**_key(target, None, 0), "learned": 1}


def _draft_id(draft_path: Path | None) -> str | None:
    ident = _file_identity(draft_path)
    return json.dumps(ident, sort_keys=True) if ident else None


def _read_learned(key: dict) -> dict | None:
    try:
        entry = json.loads(_entry_path(key).read_text())
    except (OSError, ValueError, RecursionError):
        return None
    raw = entry.get("learned") if isinstance(entry, dict) and entry.get("key") == key else None
    if not isinstance(raw, dict) or not _number(raw.get("t1_s")) or raw["t1_s"] <= 0:
        return None
    ratios, drafts = raw.get("ratios"), raw.get("draft_ratios", {})
    if not isinstance(ratios, dict) or "1" not in ratios or not isinstance(drafts, dict):
        return None
    try:
        points = {int(n): r for n, r in ratios.items()}
    except ValueError:
        return None
    if not all(1 <= n <= 4096 and _number(r) and 0 < r <= IMPLAUSIBLE * n for n, r in points.items()):
        return None
    if not all(isinstance(d, str) and _number(c) and c >= 0 for d, c in drafts.items()):
        return None
    return raw


def load_learned(key: dict, draft_path: Path | None = None) -> dict | None:
    """A StepCosts.snapshot saved by an earlier run (with this draft file's cost, if it was learnt),
    or None when there is none or it is not exactly what save_learned writes."""
    raw = _read_learned(key)
    if raw is None:
        return None
    draft = raw.get("draft_ratios", {}).get(_draft_id(draft_path)) if draft_path else None
    return {"t1_s": raw["t1_s"], "ratios": raw["ratios"], "draft_ratio": draft}


def save_learned(key: dict, snapshot: dict | None, draft_path: Path | None = None) -> None:
    """Keep a run's snapshot for the next run; the costs of other draft files stay."""
    if snapshot is None:
        return
    old = _read_learned(key) or {}
    drafts = dict(old.get("draft_ratios", {}))
    if draft_path is not None and snapshot.get("draft_ratio") is not None:
        drafts[_draft_id(draft_path)] = snapshot["draft_ratio"]
    _write(key, {"key": key, "learned": {"t1_s": snapshot["t1_s"], "ratios": snapshot["ratios"], "draft_ratios": drafts}})


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
