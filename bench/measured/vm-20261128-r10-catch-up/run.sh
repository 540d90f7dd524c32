#!/usr/bin/env bash
# The draft's catch-up on the 2-core AMD VM: base (97f5ece: merged, untimed), split (this commit with
# --draft-one-token-decodes) and the trial (this commit's default), interleaved, 3 rounds, fresh cost caches.
#   bash run.sh BASE_CHECKOUT NEW_CHECKOUT OUT_DIR
set -eu
BASE=$1 NEW=$2 OUT=$3; mkdir -p "$OUT"
PY=${PY:-/work/main/.venv/bin/python}
P=$NEW/bench/prompts_heldout.jsonl
run() {  # run LABEL CHECKOUT [FLAGS...]
  local label=$1 tree=$2; shift 2
  (cd /tmp && SPECLLAMA_COSTS=$(mktemp -d) PYTHONPATH=$tree flock /tmp/specllama-heavy.lock $PY -m specllama bench \
     --prompts "$P" --configs "none;model:k=4;auto:k=auto" -n 64 --repeat 1 -t 2 "$@" \
     --json "$OUT/$label-r$r.json" --markdown "$OUT/$label-r$r.md" > "$OUT/$label-r$r.log" 2>&1)
}
for r in 1 2 3; do
  run base "$BASE"
  run split "$NEW" --draft-one-token-decodes
  run trial "$NEW"
done
