#!/bin/bash
# usage: traces.sh WORKTREE LABEL SEED: every set's replay traced (--trace), for mispriced.py. AMD dense costs, 10 % noise.
wt=$1; label=$2; seed=$3
M=/work/main/bench/measured
out=$M/vm-20261129-r15-extrapolation/traces/$label-$seed
mkdir -p $out
cd /tmp/$wt
for f in $M/vm-20261126-greedy-answers/{heldout,tuning,copy,unseen,unseen2,unseen4,agentic,agentic-heldout}.json $M/xeon-20261127-sampled-answers/{heldout-s1,unseen-s1,unseen-s2,tuning-s1,copy-s1}.json $M/vm-20261129-r15-extrapolation/answers/unseen6-{greedy,s11,s12}.json; do
  nice /work/main/.venv/bin/python scripts/measure/policy_replay.py $f --fresh-costs --modes none,auto --repeat 2 \
      --verify-rows $M/vm-20261126-verify-rows-dense.json --noise 0.1 --noise-seed $seed --trace 2> $out/$(basename $f .json).txt > /dev/null
done
