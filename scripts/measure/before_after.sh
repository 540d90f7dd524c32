#!/bin/bash
# Behaviour and speed of two checkouts on the held-out prompts, interleaved A B A B (issue 40: before/after a refactor).
# Usage: scripts/measure/before_after.sh BEFORE_DIR AFTER_DIR OUT_DIR   (each dir a checkout; .venv of the after one)
BEFORE=$(cd "${1:?before dir}" && pwd); AFTER=$(cd "${2:?after dir}" && pwd); OUT=${3:?out dir}; mkdir -p "$OUT"
PY=$AFTER/.venv/bin/python
for r in 1 2; do
  for side in before main; do
    dir=$BEFORE; [ $side = main ] && dir=$AFTER
    costs=$(mktemp -d)
    (cd $dir && SPECLLAMA_THREAD_WAIT=spin SPECLLAMA_COSTS=$costs SPECLLAMA_PROMPT_CACHE=$costs/pc $PY -m specllama bench \
       --prompts $AFTER/bench/prompts_heldout.jsonl --configs "none;auto:k=auto" -n 96 --repeat 1 \
       --json $OUT/$side-$r.json > $OUT/$side-$r.txt 2>&1)
    echo "$side round $r rc=$?"; grep -E "^none|^auto" $OUT/$side-$r.txt | head -2
  done
done
