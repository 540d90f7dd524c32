#!/usr/bin/env bash
# A sampling drafter's q as row weights (decoding/draft_rows.py) on the 2-core AMD VM: base (d02bba5) and
# new (HEAD: 285ba4d; first/ holds 224462e's run, before the residual by rejection) in turn, 3 rounds, fresh cost caches, at --temp 0.7 (sampled drafts: what changed).
#   bash run.sh BASE_CHECKOUT NEW_CHECKOUT OUT_DIR
# Table: python ../vm-20261128-r10-catch-up/summarize.py OUT_DIR
set -eu
BASE=$1 NEW=$2 OUT=$3; mkdir -p "$OUT"
PY=${PY:-/work/main/.venv/bin/python}
P=$NEW/bench/prompts_heldout.jsonl
run() {  # run LABEL CHECKOUT
  (cd /tmp && SPECLLAMA_COSTS=$(mktemp -d) PYTHONPATH=$2 flock /tmp/specllama-heavy.lock $PY -m specllama bench \
     --prompts "$P" --configs "none;model:k=4;auto:k=auto" -n 64 --repeat 1 --temp 0.7 --seed 7 -t 2 \
     --json "$OUT/$1-r$r.json" --markdown "$OUT/$1-r$r.md" > "$OUT/$1-r$r.log" 2>&1)
}
for r in 1 2 3; do
  run base "$BASE"
  run new "$NEW"
done
