#!/bin/bash
# The held-out prompts and the blind set's seed-8 sample at --temp 0.7, a778639 (a worktree at /tmp/new12), fresh cost caches.
cd /tmp
SPECLLAMA_COSTS=$(mktemp -d) PYTHONPATH=/tmp/new12 python -m specllama bench --prompts bench/prompts_heldout.jsonl \
    --configs "none;auto:k=auto" -n 96 --repeat 3 --temp 0.7 --seed 7 -t 2 --json heldout-new-t0.7.json > heldout-new-t0.7.txt
SPECLLAMA_COSTS=$(mktemp -d) PYTHONPATH=/tmp/new12 python -m specllama bench --prompts bench/prompts_unseen5.jsonl \
    --configs "none;auto:k=auto" -n 96 --repeat 3 --temp 0.7 --seed 8 -t 2 --json unseen5-new-t0.7-s8.json > unseen5-new-t0.7-s8.txt
python scripts/measure/coupling_odds.py --prompts bench/prompts.jsonl -n 64 --temp 0.7 --seed 7 > coupling-t0.7.txt
