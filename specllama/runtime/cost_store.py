"""What this machine knows of a model pair's costs, kept between sessions: the one place a session
reads and writes it.

Three things are kept, each under a key of everything that changes the numbers (CPU, threads,
llama.cpp build, GPU layers, exact mode, the model files' identity; decoding/cost/cache.py):
- the startup curve `specllama costs` measures (a prior, optional);
- what a session's own steps taught (StepCosts.snapshot), saved when it closes, the next session's
  starting point;
- the last decision whether `--drafter auto` loads the draft model, with the prediction it was made
  on, so the next identical run does not decide otherwise on a prediction that only wobbled
  (runtime/draft_load.py).

A CostStore is built from plain settings (paths, threads), before anything is loaded: planning a
load reads it (runtime/plan.py), a loaded session writes to it.
"""

from __future__ import annotations

import json
import os
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from specllama import dirs
from specllama.decoding.cost.cache import (
    MAX_N,
    MAX_N_PARALLEL,
    cost_curve_for,
    entry_path,
    key_for,
    load_cached,
    load_learned,
    save_learned,
)
from specllama.decoding.cost.curve import CostCurve
from specllama.decoding.cost.online import Prior, StepCosts, prior_from_snapshot

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
    base = Prior(curve.ratio, curve.t1_s, curve.draft_ratio) if curve else Prior()
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

    def _key(self, draft: Path | None, max_n: int) -> dict:
        return key_for(self.target, draft, threads=self.threads, threads_batch=self.threads_batch,
                       gpu_layers=self.gpu_layers, exact=self.exact, max_n=max_n)

    @property
    def learned_key(self) -> dict:
        """The target's costs do not depend on the draft: one entry, each draft's cost inside it."""
        return {**self._key(None, 0), "learned": 1}

    # --- reading ---------------------------------------------------------------------------------

    def curve(self, draft: Path | None) -> CostCurve | None:
        """The startup curve cached for the target with this draft file (the longest measured),
        without loading anything; None when never measured."""
        for max_n in (MAX_N_PARALLEL, MAX_N):
            curve = load_cached(self._key(draft, max_n))
            if curve is not None:
                return curve
        return None

    def learned(self, draft: Path | None) -> dict | None:
        """What earlier sessions' steps taught here (with this draft's cost, when it was learnt)."""
        return load_learned(self.learned_key, draft)

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

    def last_decision(self, draft: Path) -> RecordedDecision | None:
        raw = _read_json(dirs.costs_dir() / DECISIONS_FILE).get(self._decision_id(draft))
        if not isinstance(raw, dict) or not isinstance(raw.get("load"), bool):
            return None
        predicted = raw.get("predicted")
        if not isinstance(predicted, (int, float)) or isinstance(predicted, bool) or not predicted > 0:
            return None
        return RecordedDecision(raw["load"], float(predicted))

    # --- writing ---------------------------------------------------------------------------------

    def save_learned(self, costs: StepCosts, draft: Path | None) -> None:
        """Keep what this session's steps taught, for the next session here."""
        if costs.steps:
            save_learned(self.learned_key, costs.snapshot(), draft)

    def record_decision(self, draft: Path, decision: RecordedDecision) -> None:
        path = dirs.costs_dir() / DECISIONS_FILE
        entries = _read_json(path)
        entries[self._decision_id(draft)] = {"load": decision.load, "predicted": decision.predicted}
        _write_json(path, entries)

    def measure(self, target_ctx, draft_ctx, *, remeasure: bool, on_measure: Callable[[], None] | None,
                max_n: int) -> CostCurve:
        """The startup curve: timed now (clearing both contexts) unless cached."""
        curve, _ = cost_curve_for(target_ctx, draft_ctx, remeasure=remeasure, on_measure=on_measure, max_n=max_n)
        return curve

    def _decision_id(self, draft: Path) -> str:
        return json.dumps(self._key(draft, 0), sort_keys=True)


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):  # absent, damaged or hand-edited: as if nothing was kept
        return {}
    return data if isinstance(data, dict) else {}


def _write_json(path: Path, data: dict) -> None:
    """Atomically; a store that cannot be written is skipped (it only saves a decision)."""
    tmp = path.with_suffix(f".tmp-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)
    except OSError:
        pass
    finally:
        with suppress(OSError):
            tmp.unlink(missing_ok=True)
