"""From what the user named to loaded models behind one Session: the composition root above
decoding/, and the only package that touches a model or a context on the front-ends' behalf.

  options.py     LoadOptions: what to load (plain values)
  plan.py        survey() reads the world once; plan_load(options, known) -> LoadPlan, pure
  draft_load.py  whether --drafter auto loads the draft model: the margin, and the same answer twice
  cost_store.py  what this machine knows of the costs, kept between sessions
  loaded.py      Runtime(plan, registry), the real Session (models, contexts, drafters, engine);
                 open_runtime(options) plans and loads in one call
  session.py     Session: the interface every front-end uses, and SessionInfo (describe())
  stats.py       a generation in words: the headline, --stats, --json
  notices.py     Notice: a status line, returned, never printed here

Names are imported lazily (PEP 562), so `from specllama.runtime import LoadOptions` in the command
line does not load llama.cpp: `--help` and shell completion stay instant.
"""

from __future__ import annotations

from importlib import import_module

_HOMES = {
    "LoadOptions": "options", "EXACT_MODE": "options", "parallel_slots": "options", "model_refs": "options",
    "LoadPlan": "plan", "Known": "plan", "plan_load": "plan", "survey": "plan",
    "Runtime": "loaded", "open_runtime": "loaded",
    "Session": "session", "SessionInfo": "session",
    "Notice": "notices",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name in _HOMES:
        return getattr(import_module(f"specllama.runtime.{_HOMES[name]}"), name)
    raise AttributeError(f"module 'specllama.runtime' has no attribute {name!r}")
