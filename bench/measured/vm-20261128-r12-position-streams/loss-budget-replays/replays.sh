#!/bin/bash
# replays.sh CODE_DIR CURVE PROPOSE_MS: auto vs none on recorded answers, fresh costs, 3 rounds
CODE=$1; CURVE=$2; MS=$3
M=/work/main/bench/measured
for f in $M/xeon-20261127-sampled-answers/{tuning-s1,tuning-s2,copy-s1,copy-s2,similar-s1}.json $M/vm-20261126-greedy-answers/{tuning,copy,similar,agentic,agentic-heldout}.json; do
  name=$(basename $(dirname $f))/$(basename $f .json)
  out=$(cd /tmp && PYTHONPATH=$CODE /work/main/.venv/bin/python $CODE/scripts/measure/policy_replay.py $f --fresh-costs --modes none,auto --repeat 3 --curve $CURVE --propose-ms $MS 2>&1)
  below=$(echo "$out" | awk -F'|' '$2~/auto/ && $5+0<0.97 && $5!="" {printf "%s %s;", $3, $5}')
  echo "$name: $(echo "$out" | grep '^auto:') | below 0.97: $below"
done
