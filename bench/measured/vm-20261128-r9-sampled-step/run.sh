#!/bin/bash
# The sampled-step A/B: base (3291e8c) and new (ba4746f) in turn, 3 rounds, the order flipped each round,
# each run from a fresh cost cache: `specllama bench --prompts bench/prompts_heldout.jsonl
# --configs "none;auto:k=auto" -n 96 --repeat 1 --temp 0.7 --seed 7 -t 2`. Needs worktrees of both
# commits at /tmp/base and /tmp/new (`git worktree add /tmp/base 3291e8c`); runs from /tmp so that
# PYTHONPATH picks the code. Output: base-rN.json / new-rN.json beside this file.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
cd /tmp
for round in 1 2 3; do
    order="base new"; [ $((round % 2)) = 0 ] && order="new base"
    for v in $order; do
        SPECLLAMA_COSTS=$(mktemp -d) PYTHONPATH=/tmp/$v flock /tmp/specllama-heavy.lock "$REPO/.venv/bin/python" -m specllama \
            bench --prompts "$REPO/bench/prompts_heldout.jsonl" --configs "none;auto:k=auto" -n 96 --repeat 1 \
            --temp 0.7 --seed 7 -t 2 -q --json "$HERE/$v-r$round.json" > "$HERE/$v-r$round.txt" 2>&1
        echo "round $round $v done $(date +%T)"
    done
done
