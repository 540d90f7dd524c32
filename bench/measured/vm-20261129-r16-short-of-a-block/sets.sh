#!/bin/bash
# usage: sets.sh WORKTREE LABEL SEED [replay flags...]: every set (21) replayed, AMD dense costs (a later
# --verify-rows wins: slow-tail.json for the n-sn-* runs), noise 0.1; into replays/n-LABEL-SEED.txt
wt=$1; label=$2; seed=$3; shift 3
M=/work/main/bench/measured
R=$M/vm-20261129-r15-extrapolation/answers
cd /tmp/$wt 2>/dev/null || cd /work/main
for f in $M/vm-20261126-greedy-answers/{heldout,tuning,copy,unseen,unseen2,unseen4,agentic,agentic-heldout}.json $M/xeon-20261127-sampled-answers/{heldout-s1,unseen-s1,unseen-s2,tuning-s1,unseen-s3,unseen-s4,unseen-s5,heldout-s2,copy-s1,tuning-s2}.json $R/unseen6-{greedy,s11,s12}.json; do
  r=$(nice /work/main/.venv/bin/python scripts/measure/policy_replay.py $f --modes none,auto --repeat 2 \
      --verify-rows $M/vm-20261126-verify-rows-dense.json --noise 0.1 --noise-seed $seed "$@" 2>&1 | grep '^auto:')
  echo "$(basename $f .json) $r"
done > /work/main/bench/measured/vm-20261129-r16-short-of-a-block/replays/n-$label-$seed.txt
