"""Where a model-drafting step's draft time goes in a real run: the draft's decodes, and choosing each drafted
token from their logits (greedy: an argmax; sampled: the row worked out and a draw), timed per step inside a
real `specllama` command run in this process (ask_split.py's machinery, every run kept); the table (stderr)
gives per part the median and mean microseconds a step.

Why: at a temperature the draft model drew each token from `probabilities()`' whole 152k-float row and a
second pass over it, ~360 us a drafted token on the 2-core machine beside a ~17 ms draft decode, but beside
a ~3 ms one on a GPU (decoding/draft_rows.py).

    python scripts/measure/draft_split.py bench --prompts bench/prompts_heldout.jsonl \\
        --configs "model:k=4" -n 48 --repeat 1 --temp 0.7 --seed 7 -t 2
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import ask_split  # noqa: E402

PARTS = [
    ("specllama.decoding.drafters", "ModelDrafter", "propose", "draft (ModelDrafter.propose, all of it)"),
    ("specllama.decoding.drafters", "ModelDrafter", "_decode", "  its decodes (_decode)"),
    ("specllama.decoding.drafters", None, "_choose", "  choosing the tokens (_choose)"),
    ("specllama.decoding.drafters", None, "probabilities", "    a normalised row (probabilities; before)"),
    ("specllama.decoding.drafters", None, "sample", "    a draw from it (sample; before)"),
    ("specllama.decoding.drafters", None, "row_weights", "    the row's weights (row_weights)"),
    ("specllama.decoding.engine", None, "_judge", "judge (engine._judge)"),
]

if __name__ == "__main__":
    ask_split.run_split(PARTS, auto_only=False)
