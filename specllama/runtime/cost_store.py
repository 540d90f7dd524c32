"""What this machine knows of a model pair's costs, kept between sessions: the one place they are
read and written.

Three things are kept, each under a key of everything that changes the numbers: the CPU, the
thread counts and how the threads wait (sleeping threads made one-token decodes ~25 % dearer and so
batches look cheap: llama/thread_wait.py), the llama.cpp build, where the layers run (GPU offload),
the cache type (exact mode), and each model file's path, size and modification time; change any of
them and the entry is not used:
- the startup curve `specllama costs` measures (a prior, optional); a curve that contradicts itself
  (a batch of n rows dearer than n one-row decodes, as measured while another process held the
  cores) is neither trusted nor cached;
- what a session's own steps taught (StepCosts.snapshot), saved when it closes, the next session's
  starting point;
- the last decision whether `--drafter auto` loads the draft model, with the prediction it was made
  on, so the next identical run does not decide otherwise on a prediction that only wobbled
  (runtime/draft_load.py), and the same for the target's own MTP head (`mtp_ratio`, the head's
  learnt cost a draft position, is kept in the learnt entry beside the draft models' costs).

A CostStore is built from plain settings (paths, threads), before anything is loaded: planning a
load reads it (runtime/plan.py), a loaded session writes to it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator

from specllama import dirs
from specllama.decoding.cost.curve import CostCurve, measure_cost_curve
from specllama.decoding.cost.online import Prior, StepCosts, prior_from_snapshot
from specllama.decoding.request import PARALLEL_MAX
from specllama.llama import thread_wait
from specllama.llama.backend import library_version
from specllama.llama.context import DecodeContext
from specllama.llama.machine import cpu_model

MAX_N = 16  # one prompt: verify batches of up to 16 tokens (K <= 15)
MAX_N_PARALLEL = PARALLEL_MAX  # several prompts: N sequences x (K + 1) rows, as many as --parallel's most
DECISIONS_FILE = "draft-decisions.json"


@dataclass(frozen=True)
class RecordedDecision:
    """What an earlier run here decided for this draft under `--drafter auto`."""

    load: bool
    predicted: float  # the predicted rate the decision was made on


def starting_prior(curve: CostCurve | None, learned: dict | None, draft_size_ratio: float | None) -> Prior:
    """What costs are believed before the first step: what an earlier run on this machine learnt,
    else the startup curve's shape (`specllama costs`), else a generic shape; the draft's cost from
    the same, else its file size against the target's (decoding reads every weight once per token:
    the 0.5B/1.5B pair's sizes say 0.44, measured 0.44-0.69)."""
    base = Prior(curve.ratio, curve.t1_s, curve.draft_ratio, known=frozenset(range(1, curve.max_n + 1))) if curve else Prior()
    prior = prior_from_snapshot(learned, base) if learned else base
    if prior.draft_ratio is None and draft_size_ratio is not None:
        prior.draft_ratio = draft_size_ratio
    return prior


@dataclass(frozen=True)
class CostStore:
    target: Path
    threads: int
    threads_batch: int
    gpu_layers: int
    exact: bool
    flash_attn: str = "auto"  # as asked (--flash-attn): what a step costs depends on it
    backend_argmax: bool = False  # greedy rows' argmax on the backend (llama/device_argmax.py): so does it

    def _key(self, draft: Path | None, max_n: int) -> dict:
        return key_for(self.target, draft, threads=self.threads, threads_batch=self.threads_batch,
                       gpu_layers=self.gpu_layers, exact=self.exact, max_n=max_n, flash_attn=self.flash_attn,
                       backend_argmax=self.backend_argmax)

    @property
    def learned_key(self) -> dict:
        """The target's costs do not depend on the draft: one entry, each draft's cost inside it."""
        return {**self._key(None, 0), "learned": 1}

    # --- reading ---------------------------------------------------------------------------------

    def curve(self, draft: Path | None) -> CostCurve | None:
        """The startup curve cached for the target with this draft file (the longest measured),
        else the target's alone (its draft's cost then unknown), without loading anything; None
        when never measured."""
        for name in (draft, None) if draft is not None else (None,):
            for max_n in (MAX_N_PARALLEL, MAX_N):
                curve = load_cached(self._key(name, max_n))
                if curve is not None:
                    return curve if name == draft else replace(curve, draft_ratio=None)
        return None

    def learned(self, draft: Path | None) -> dict | None:
        """What earlier sessions' steps taught here (with this draft's cost, when it was learnt)."""
        return load_learned(self.learned_key, draft)

    def head_cost(self) -> float | None:
        """The target's MTP head's cost a draft position in plain steps, as earlier runs here
        timed it; None before one drafted with it."""
        return (self.learned(None) or {}).get("mtp_ratio")

    def draft_cost_known(self, draft: Path) -> bool:
        """Whether this draft's cost here was ever measured (by a run that used it, or `costs`)."""
        curve = self.curve(draft)
        return (self.learned(draft) or {}).get("draft_ratio") is not None or bool(curve and curve.draft_ratio)

    def prior(self, draft: Path | None) -> Prior:
        size_ratio = draft.stat().st_size / self.target.stat().st_size if draft is not None else None
        return starting_prior(self.curve(draft), self.learned(draft), size_ratio)

    def cache_file(self, draft: Path | None, max_n: int = MAX_N) -> Path:
        """Where the startup curve for these models and threads is (or would be) cached."""
        return entry_path(self._key(draft, max_n))

    def last_decision(self, draft: Path | None) -> RecordedDecision | None:
        """The last decision under `--drafter auto` for this draft (None: for the MTP head)."""
        raw = _read_json(dirs.costs_dir() / DECISIONS_FILE).get(self._decision_id(draft))
        if not isinstance(raw, dict) or not isinstance(raw.get("load"), bool):
            return None
        predicted = raw.get("predicted")
        if not isinstance(predicted, (int, float)) or isinstance(predicted, bool) or not predicted > 0:
            return None
        return RecordedDecision(raw["load"], float(predicted))

    # --- writing ---------------------------------------------------------------------------------

    def save_learned(self, costs: StepCosts, draft: Path | None) -> None:
        """Keep what this session's steps taught, for the next session here (the MTP head's cost
        where its drafts were timed)."""
        if costs.steps:
            head = costs.draft_ratio("mtp") if costs.drafts_by.get("mtp") else None
            save_learned(self.learned_key, costs.snapshot(), draft, head)

    def record_decision(self, draft: Path | None, decision: RecordedDecision) -> None:
        """Keep the decision for this draft (None: the MTP head's)."""
        path = dirs.costs_dir() / DECISIONS_FILE
        entries = _read_json(path)
        entries[self._decision_id(draft)] = {"load": decision.load, "predicted": decision.predicted}
        _write_json(path, entries)

    def measure(self, target_ctx, draft_ctx, *, remeasure: bool, on_measure: Callable[[], None] | None,
                max_n: int) -> CostCurve:
        """The startup curve: timed now (clearing both contexts) unless cached. One timed with a
        draft model loaded is kept for the target alone as well: its T(n)/T(1) do not depend on the
        draft, and a session that leaves the draft unloaded (`--drafter auto` where it does not pay,
        as on 2 cores) looks the curve up without one. Before, `specllama costs` on the default pair
        cached a curve no such session ever read."""
        curve, measured_now = cost_curve_for(target_ctx, draft_ctx, remeasure=remeasure, on_measure=on_measure,
                                             max_n=max_n)
        if draft_ctx is not None and (measured_now or load_cached(self._key(None, max_n)) is None):
            save(self._key(None, max_n), replace(curve, draft_ratio=None))
        return curve

    def _decision_id(self, draft: Path | None) -> str:
        key = self._key(draft, 0) if draft is not None else {**self._key(None, 0), "mtp": 1}
        return json.dumps(key, sort_keys=True)


# --- the files: keys, entries, checks -----------------------------------------------------------


def _file_identity(path: Path | None) -> dict | None:
    if path is None:
        return None
    stat = path.stat()
    return {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def key_for(target_path: Path, draft_path: Path | None, *, threads: int, threads_batch: int, gpu_layers: int,
            exact: bool, max_n: int, flash_attn: str = "auto", backend_argmax: bool = False) -> dict:
    """The key from the settings themselves, before any context exists: what is known of the costs
    is read while a load is planned (runtime/plan.py)."""
    # Only where it is on, so that the costs learnt before the switch existed keep their key.
    argmax = {"backend_argmax": True} if backend_argmax else {}
    return {
        **argmax,
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "threads": threads,
        "threads_batch": threads_batch,
        "thread_wait": thread_wait.key(),
        "llama_cpp_python": library_version(),
        "gpu_layers": gpu_layers,
        "exact": exact,
        # Named so that no cost learnt before attention was chosen here (llama.cpp's auto: on) is
        # taken for one without it: a verify batch at depth costs a third less off (llama/attention.py).
        "flash_attn": flash_attn,
        "target": _file_identity(target_path),
        "draft": _file_identity(draft_path),
        "max_n": max_n,
    }


def cache_key(target: DecodeContext, draft: DecodeContext | None, max_n: int = MAX_N) -> dict:
    """The key of the curve measured on these contexts (the same as CostStore's for their settings)."""
    return key_for(target.model.path, draft.model.path if draft is not None else None, threads=target.n_threads,
                   threads_batch=target.n_threads_batch, gpu_layers=getattr(target.model, "n_gpu_layers", 0),
                   exact=bool(getattr(target, "exact", False)), max_n=max_n,
                   flash_attn=getattr(target, "flash_attn_asked", "auto"),
                   backend_argmax=getattr(target, "backend_argmax", False))


def entry_path(key: dict) -> Path:
    """The file an entry of this key is (or would be) kept in."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    return dirs.costs_dir() / f"{digest}.json"


def load_cached(key: dict) -> CostCurve | None:
    """The cached curve, or None for anything that is not exactly what `save` writes (a damaged or
    hand-edited file is measured again, never allowed to break every later run)."""
    path = entry_path(key)
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
    lock = entry_path(key).with_suffix(".lock")
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
        _write_json(entry_path(key), {"key": key, "curve": curve.to_dict()})


def _draft_id(draft_path: Path | None) -> str | None:
    ident = _file_identity(draft_path)
    return json.dumps(ident, sort_keys=True) if ident else None


def _read_learned(key: dict) -> dict | None:
    try:
        entry = json.loads(entry_path(key).read_text())
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
    head = raw.get("mtp_ratio")
    if head is not None and not (_number(head) and head >= 0):
        return None
    switch = raw.get("switch_ratio")
    if switch is not None and not (_number(switch) and -1 <= switch <= 20):  # plain steps: 1.8 on an H100
        return None
    return raw


def load_learned(key: dict, draft_path: Path | None = None) -> dict | None:
    """A StepCosts.snapshot saved by an earlier run (with this draft file's cost, if it was learnt),
    or None when there is none or it is not exactly what save_learned writes."""
    raw = _read_learned(key)
    if raw is None:
        return None
    draft = raw.get("draft_ratios", {}).get(_draft_id(draft_path)) if draft_path else None
    return {"t1_s": raw["t1_s"], "ratios": raw["ratios"], "draft_ratio": draft, "mtp_ratio": raw.get("mtp_ratio"),
            "switch_ratio": raw.get("switch_ratio")}


def save_learned(key: dict, snapshot: dict | None, draft_path: Path | None = None, head_ratio: float | None = None) -> None:
    """Keep a run's snapshot for the next run; the costs of other draft files stay, and the MTP
    head's unless this run timed it (`head_ratio`), and so do the batch sizes this run did not time:
    a run that drafted little (`--no-draft`, short answers) wrote only T(1), and the next `auto`
    lost what earlier runs had learnt of big batches and started over (found measuring the agentic
    replay with the costs kept: its plain arm ran between two auto ones)."""
    if snapshot is None:
        return
    old = _read_learned(key) or {}
    drafts = dict(old.get("draft_ratios", {}))
    if draft_path is not None and snapshot.get("draft_ratio") is not None:
        drafts[_draft_id(draft_path)] = snapshot["draft_ratio"]
    ratios = {**old.get("ratios", {}), **snapshot["ratios"]}
    learned = {"t1_s": snapshot["t1_s"], "ratios": ratios, "draft_ratios": drafts}
    head = head_ratio if head_ratio is not None else old.get("mtp_ratio")
    if head is not None:
        learned["mtp_ratio"] = head
    # What going back to plain decoding costs (cost/online.py): this run's, else an earlier one's.
    switch = snapshot.get("switch_ratio") if snapshot.get("switch_ratio") is not None else old.get("switch_ratio")
    if switch is not None:
        learned["switch_ratio"] = switch
    _write_json(entry_path(key), {"key": key, "learned": learned})


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


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):  # absent, damaged or hand-edited: as if nothing was kept
        return {}
    return data if isinstance(data, dict) else {}


def _write_json(path: Path, data: dict) -> None:
    """Atomically; a store that cannot be written is skipped (it only saves time or a decision)."""
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)
    except OSError:
        pass
    finally:  # also on Ctrl-C mid-write: no .tmp-PID file left behind (there were some)
        with suppress(OSError):
            tmp.unlink(missing_ok=True)
