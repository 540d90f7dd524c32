"""Where the Python of asking goes in a real run: each part of a step's drafting work (the suffix
drafter's following of its proposals, index catch-up, lookup, path walk, odds; the policy's review and
learning; the planner) timed per step inside a real `specllama bench` run, llama.cpp decoding between
them. Any specllama command line follows, run in this process with those parts wrapped; the table
(stderr) gives per part the median and mean microseconds a step, over the steps that sent nothing and
over all steps.

Why: replays (policy_replay.py, step_python.py) time the same code at ~5x less than a real process,
where each decode's ~1 GB of weights leaves the caches cold (bench/measured/vm-20261128-r7-unseen4.md:
0.035 ms against 0.165 ms a step). What to cut has to be read here.

    python scripts/measure/ask_split.py bench --prompts bench/prompts_unseen4.jsonl \
        --configs "auto:k=auto" -n 96 --repeat 1 --seed 7 -t 2
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specllama.cli.main import main  # noqa: E402

# (module, class, method, label): timed each call, summed per step. Nested parts are timed inside
# their callers (ask = the engine's whole _draft; lookup etc. inside it).
PARTS = [
    ("specllama.decoding.engine", "Engine", "_draft", "ask (engine._draft, all of it)"),
    ("specllama.decoding.suffix_drafter", "SuffixDrafter", "_propose_one", "  the suffix drafter (_propose_one)"),
    ("specllama.decoding.suffix_drafter", "SuffixDrafter", "_judge_shadows", "    follow proposals (_judge_shadows)"),
    ("specllama.decoding.suffix_renames", "Renames", "follow", "    renames (Renames.follow)"),
    ("specllama.decoding.suffix_drafter", "SuffixDrafter", "_reach", "    reach check (_reach)"),
    ("specllama.decoding.suffix_drafter", "SuffixDrafter", "_catch_up", "    index catch-up (_catch_up)"),
    ("specllama.decoding.suffix_index", "SuffixIndex", "sync_live", "      the whole text compared (sync_live)"),
    ("specllama.decoding.suffix_index", "SuffixIndex", "live_key", "    context key (live_key)"),
    ("specllama.decoding.suffix_drafter", "SuffixDrafter", "_longest", "    lookup (_longest)"),
    ("specllama.decoding.suffix_index", "SuffixIndex", "follow", "    path walk (follow)"),
    ("specllama.decoding.suffix_drafter", "SuffixDrafter", "_odds", "    odds (_odds)"),
    ("specllama.decoding.suffix_drafter", "SuffixProposal", "__init__", "    its proposal made (SuffixProposal)"),
    ("specllama.decoding.proposal", "Proposal", "keep", "  cut to the ask (Proposal.keep)"),
    ("specllama.decoding.proposal", "Proposal", "through_end", "  cut at an end (Proposal.through_end)"),
    ("specllama.decoding.policy.source_choice", "SourceChoice", "review", "  policy review"),
    ("specllama.decoding.planner", "Planner", "asks", "planner asks"),
    ("specllama.decoding.planner", "Planner", "cut", "planner cut"),
    ("specllama.decoding.suffix_drafter", "SuffixDrafter", "observe", "drafter observe"),
    ("specllama.decoding.policy.source_choice", "SourceChoice", "observe", "policy observe"),
]

_spent: dict[str, float] = {}
_steps: list[tuple[bool, dict[str, float]]] = []  # (sent something, seconds per part)
_wrapped: set[str] = set()


def _timed(fn, label: str):
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _spent[label] = _spent.get(label, 0.0) + time.perf_counter() - t
    return wrapper


def wrap_parts(patch=setattr, parts=PARTS, auto_only: bool = True) -> None:
    """Wrap every part (`patch`: how, e.g. a test's monkeypatch.setattr, which undoes it; a part whose
    class is None is a module's function, wrapped where that module calls it). A step's row is kept for
    `auto` runs alone unless auto_only is False. Imported after the threads' wait level is set (see
    trace_drafts.py)."""
    import importlib

    for module, cls, method, label in parts:
        try:
            owner = importlib.import_module(module)
        except ModuleNotFoundError:  # a module another commit has not (the table says "-")
            continue
        owner = getattr(owner, cls, None) if cls is not None else owner
        if owner is not None and hasattr(owner, method):  # likewise a class or a method
            patch(owner, method, _timed(getattr(owner, method), label))
            _wrapped.add(label)
    from specllama.decoding.engine import Engine
    from specllama.decoding.policy.source_choice import SourceChoice

    learn = Engine._learn

    def closing_step(self, running, outcomes):  # the last part of a step: close its row
        out = learn(self, running, outcomes)
        if len(running) == 1 and (not auto_only or isinstance(running[0].policy, SourceChoice)):
            _steps.append((bool(outcomes[0].drafted), dict(_spent)))
        _spent.clear()
        return out

    patch(Engine, "_learn", closing_step)


def table(parts=PARTS) -> list[str]:
    """Per part: median / mean microseconds a step, over the steps that sent nothing and over all."""
    quiet = [s for sent, s in _steps if not sent]
    lines = [f"{len(_steps)} steps, {len(quiet)} sent nothing; microseconds a step (median / mean)",
             f"{'part':42s} {'sent nothing':>16s} {'all steps':>16s}"]
    for *_, label in parts:
        if label not in _wrapped:
            lines.append(f"{label:42s} {'-':>16s} {'-':>16s}")
            continue
        cols = []
        for rows in (quiet, [s for _, s in _steps]):
            values = [r.get(label, 0.0) * 1e6 for r in rows] or [0.0]
            cols.append(f"{statistics.median(values):7.1f} / {statistics.fmean(values):6.1f}")
        lines.append(f"{label:42s} {cols[0]:>16s} {cols[1]:>16s}")
    return lines


def run_split(parts=PARTS, auto_only: bool = True) -> None:
    """A script's main: the command line after the script's name run with `parts` timed, then the table."""
    from trace_drafts import configure_threads

    argv = sys.argv[1:]
    configure_threads(argv)
    wrap_parts(parts=parts, auto_only=auto_only)
    code = main(argv)
    print("\n" + "\n".join(table(parts)), file=sys.stderr)
    sys.exit(code)


if __name__ == "__main__":
    run_split()
