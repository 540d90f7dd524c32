#!/bin/bash
# Real runs, ABBA: base (/tmp/v0, a worktree of ae3244e: main before the ramp) and the change (/tmp/vb, a worktree
# of e53474a: the ramp as landed), each from a fresh cost cache; PYTHONPATH picks the tree.
# usage: abba.sh PROMPTS TEMP SEED (TEMP 0: greedy); writes TAG-{1-base,2-new,3-new,4-base}.{json,txt} here
cd "$(git rev-parse --show-toplevel)"
M=bench/measured/vm-20261129-r18-late-ramp
p=$1; t=$2; s=$3; set=$(basename $p .jsonl | sed 's/prompts_//'); tag=$set-$([ "$t" = 0 ] && echo greedy || echo t$t-s$s)
run() { # tree out
  tree=$1; out=$2
  SPECLLAMA_COSTS=$(mktemp -d) PYTHONPATH=/tmp/$tree flock /tmp/specllama-heavy.lock .venv/bin/specllama bench \
    --prompts $p --configs "none;auto:k=auto" -n 96 --repeat 1 -t 2 --temp $t --seed $s --json $M/$out.json > $M/$out.txt 2>&1
}
run v0 $tag-1-base
run vb $tag-2-new
run vb $tag-3-new
run v0 $tag-4-base
