#!/bin/bash
# Real runs, ABBA, on the eighth blind set: base (09224e9, a worktree at /tmp/v0) and the change (/tmp/vb: the same
# with variant-short-of-a-block.diff applied), each
# from a fresh cost cache; PYTHONPATH picks the tree. usage: abba.sh TEMP SEED (TEMP 0: greedy)
cd "$(git rev-parse --show-toplevel)"
M=bench/measured/vm-20261129-r16-short-of-a-block
t=$1; s=$2; tag=$([ "$t" = 0 ] && echo greedy || echo t$t-s$s)
run() { # tree out
  SPECLLAMA_COSTS=$(mktemp -d) PYTHONPATH=/tmp/$1 .venv/bin/specllama bench --prompts bench/prompts_unseen8.jsonl \
    --configs "none;auto:k=auto" -n 96 --repeat 1 -t 2 --temp $t --seed $s --json $M/$2.json > $M/$2.txt 2>&1
}
run v0 $tag-1-base
run vb $tag-2-new
run vb $tag-3-new
run v0 $tag-4-base
