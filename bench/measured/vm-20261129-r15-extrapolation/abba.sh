#!/bin/bash
# Real runs, ABBA, greedy, the seventh blind set: base (63396ba, a worktree at /tmp/v0) and the fix (43f1fab's
# cost/online.py, /tmp/v1), each from a fresh cost cache; PYTHONPATH picks the tree.
cd "$(git rev-parse --show-toplevel)"
M=bench/measured/vm-20261129-r15-extrapolation
run() { # tree out
  SPECLLAMA_COSTS=$(mktemp -d) PYTHONPATH=/tmp/$1 .venv/bin/specllama bench --prompts bench/prompts_unseen7.jsonl \
    --configs "none;auto:k=auto" -n 96 --repeat 1 -t 2 --json $M/$2.json > $M/$2.txt 2>&1
}
run v0 abba-1-base
run v1 abba-2-fix
run v1 abba-3-fix
run v0 abba-4-base
