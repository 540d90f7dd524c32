#!/bin/bash
# Real runs, ABBA: base (a worktree of ab0fce7 at /tmp/v0: main before the probation) and the change (/tmp/vb: the
# same with the probation applied, as landed), each from a fresh cost cache; PYTHONPATH picks the tree.
# usage: abba.sh PROMPTS TEMP SEED (TEMP 0: greedy); output PREFIX-{1-base,2-new,3-new,4-base}.{json,txt} here
cd "$(git rev-parse --show-toplevel)"
M=bench/measured/vm-20261129-r17-probation
p=$1; t=$2; s=$3; set=$(basename $p .jsonl | sed 's/prompts_//'); tag=$set-$([ "$t" = 0 ] && echo greedy || echo t$t-s$s)
run() { # tree out
  SPECLLAMA_COSTS=$(mktemp -d) PYTHONPATH=/tmp/$1 flock /tmp/specllama-heavy.lock .venv/bin/specllama bench \
    --prompts $p --configs "none;auto:k=auto" -n 96 --repeat 1 -t 2 --temp $t --seed $s --json $M/$2.json > $M/$2.txt 2>&1
}
run v0 $tag-1-base
run vb $tag-2-new
run vb $tag-3-new
run v0 $tag-4-base
