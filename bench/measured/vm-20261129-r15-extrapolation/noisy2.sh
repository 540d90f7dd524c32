#!/bin/bash
# usage: noisy2.sh WORKTREE LABEL SEED: the extra sets (unseen6 recorded this session, more sampled sets)
wt=$1; label=$2; seed=$3
M=/work/main/bench/measured
cd /tmp/$wt
for f in $M/vm-20261129-r15-extrapolation/answers/unseen6-{greedy,s11,s12}.json $M/xeon-20261127-sampled-answers/{unseen-s3,unseen-s4,unseen-s5,heldout-s2,copy-s1,tuning-s2}.json; do
  r=$(/work/main/.venv/bin/python scripts/measure/policy_replay.py $f --fresh-costs --modes none,auto --repeat 2 \
      --verify-rows $M/vm-20261126-verify-rows-dense.json --noise 0.1 --noise-seed $seed 2>&1 | grep '^auto:')
  echo "$(basename $f .json) $r"
done > /work/main/bench/measured/vm-20261129-r15-extrapolation/replays/m-$label-$seed.txt
