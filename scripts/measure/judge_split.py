"""Where the Python of judging a step goes in a real run: the engine's `_judge` (rejection sampling
at a temperature: the target's row worked out, a token drawn), the commit and the emitting, timed per
step inside a real `specllama` command run in this process (ask_split.py's machinery, every run kept,
`none` included); the table (stderr) gives per part the median and mean microseconds a step.

Why: at --temp 0.7 Python took 23 % of plain decoding's time on the lent H200, whose step is ~2.9 ms
(bench/measured/lent-20261127-r2-gpu-heldout-t0.7); a replay cannot show it (its fake target has no
logits), and each pass over a 152k-float row costs several times more after a real decode than warm.

    python scripts/measure/judge_split.py bench --prompts bench/prompts_heldout.jsonl \\
        --configs none -n 96 --repeat 1 --temp 0.7 --seed 7 -t 2
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import ask_split  # noqa: E402

PARTS = [
    ("specllama.decoding.engine", None, "_judge", "judge (engine._judge, all of it)"),
    ("specllama.decoding.engine", None, "verify_sampling", "  rejection sampling (verify_sampling)"),
    ("specllama.decoding.target_rows", "PeakedRow", "of", "    hot tokens (PeakedRow.of)"),
    ("specllama.decoding.target_rows", "PeakedRow", "draw", "    a draw from them (PeakedRow.draw)"),
    ("specllama.decoding.target_rows", "PeakedRow", "whole", "    the whole row (PeakedRow.whole)"),
    ("specllama.decoding.target_rows", "KeptWeights", "draw", "    a draw, kept weights (KeptWeights.draw)"),
    ("specllama.decoding.target_rows", "LazyProbabilities", "__getitem__", "    a normalised row (rows[i])"),
    ("specllama.decoding.verifiers", "CausalVerifier", "commit", "commit (CausalVerifier.commit)"),
    ("specllama.decoding.slot", "Slot", "emit_guarded", "emit (Slot.emit_guarded)"),
]

if __name__ == "__main__":
    ask_split.run_split(PARTS, auto_only=False)
