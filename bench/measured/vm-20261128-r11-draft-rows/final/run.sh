#!/usr/bin/env bash
# After the catch-up pricing (fdd93f0): base (d02bba5) and new in turn, at --temp 0.7 and greedy, 2 rounds each,
# fresh cost caches.   bash run.sh BASE_CHECKOUT NEW_CHECKOUT OUT_DIR
# Tables: python ../../vm-20261128-r10-catch-up/summarize.py OUT_DIR/t0.7 (and OUT_DIR/t0)
set -eu
BASE=$1 NEW=$2 OUT=$3
PY=${PY:-/work/main/.venv/bin/python}
P=$NEW/bench/prompts_heldout.jsonl
run() {  # run LABEL CHECKOUT TEMP
  mkdir -p "$OUT/t$3"
  (cd /tmp && SPECLLAMA_COSTS=$(mktemp -d) PYTHONPATH=$2 flock /tmp/specllama-heavy.lock $PY -m specllama bench \
     --prompts "$P" --configs "none;model:k=4;auto:k=auto" -n 64 --repeat 1 --temp $3 --seed 7 -t 2 \
     --json "$OUT/t$3/$1-r$r.json" --markdown "$OUT/t$3/$1-r$r.md" > "$OUT/t$3/$1-r$r.log" 2>&1)
}
for r in 1 2; do
  for t in 0.7 0; do
    run base "$BASE" $t
    run new "$NEW" $t
  done
done
