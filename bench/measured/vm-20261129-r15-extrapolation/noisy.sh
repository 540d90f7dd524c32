#!/bin/bash
# usage: noisy.sh WORKTREE LABEL SEED [extra answer files...]: AMD dense costs, decode time x exp(N(0, 0.1))
wt=$1; label=$2; seed=$3; shift 3
M=/work/main/bench/measured
cd /tmp/$wt
for f in $M/vm-20261126-greedy-answers/{heldout,tuning,copy,unseen,unseen2,unseen4,agentic,agentic-heldout}.json $M/xeon-20261127-sampled-answers/{heldout-s1,unseen-s1,unseen-s2,tuning-s1}.json "$@"; do
  r=$(/work/main/.venv/bin/python scripts/measure/policy_replay.py $f --fresh-costs --modes none,auto --repeat 2 \
      --verify-rows $M/vm-20261126-verify-rows-dense.json --noise 0.1 --noise-seed $seed 2>&1 | grep '^auto:')
  echo "$(basename $f .json) $r"
done > /work/main/bench/measured/vm-20261129-r15-extrapolation/replays/n-$label-$seed.txt
