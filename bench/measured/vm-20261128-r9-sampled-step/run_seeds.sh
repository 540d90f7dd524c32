#!/bin/bash
# The A/B of run.sh again with the final code (/tmp/new at this folder's commit) and a seed a round
# (7..10, the same for both versions), so that texts, and which prompts draft, differ round to round:
# `SPECLLAMA_COSTS=$(mktemp -d) specllama bench --prompts bench/prompts_heldout.jsonl
# --configs "none;auto:k=auto" -n 96 --repeat 1 --temp 0.7 --seed S -t 2`, base and new in turn, the
# order flipped each round. Output: seeds-VERSION-sS.json / .txt beside this file.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
cd /tmp
for seed in 7 8 9 10; do
    order="base new"; [ $((seed % 2)) = 0 ] && order="new base"
    for v in $order; do
        SPECLLAMA_COSTS=$(mktemp -d) PYTHONPATH=/tmp/$v flock /tmp/specllama-heavy.lock "$REPO/.venv/bin/python" -m specllama \
            bench --prompts "$REPO/bench/prompts_heldout.jsonl" --configs "none;auto:k=auto" -n 96 --repeat 1 \
            --temp 0.7 --seed $seed -t 2 -q --json "$HERE/seeds-$v-s$seed.json" > "$HERE/seeds-$v-s$seed.txt" 2>&1
        echo "seed $seed $v done $(date +%T)"
    done
done
