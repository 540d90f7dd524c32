#!/bin/bash
# usage: run.sh VARIANT COSTS(amd|slow|h200)
v=$1; c=$2
M=/work/main/bench/measured
case $c in
 amd) opt="--verify-rows $M/vm-20261126-verify-rows-dense.json";;
 slow) opt="--curve $M/vm-20261128-r13-shared-text/unseen5-t0.7-s7.json";;
 h200) opt="--curve $M/lent-20261127-r2-gpu-heldout-t0.json --propose-ms 0.13 --aftermath 0.93";;
esac
cd /tmp/$v  # a git worktree of the tree to replay (base: ddc0283; new: the change)
for f in $M/vm-20261126-greedy-answers/{heldout,tuning,similar,copy,unseen,unseen2,unseen3,unseen4,agentic,agentic-heldout}.json $M/xeon-20261127-sampled-answers/{heldout-s1,unseen-s1,unseen-s2,copy-s1,tuning-s1}.json; do
  r=$(/work/main/.venv/bin/python scripts/measure/policy_replay.py $f --fresh-costs --modes none,auto --repeat 2 $opt 2>&1 | grep '^auto:')
  echo "$(basename $f .json) $r"
done
