#!/bin/bash
# usage: suffix.sh TREE LABEL: `--drafter suffix -k auto` (ConfidentAuto, which the ramp also cuts) against plain on the
# 21 recorded sets, AMD dense costs, fresh costs, noise 0.1 seed 1 (as r16's sets.sh, mode suffix), under the heavy
# lock (the real ABBA runs were going on); TREE: /tmp/v0 (before) or /tmp/vb (the ramp); into replays/s-LABEL.txt
M=/work/main/bench/measured; R=$M/vm-20261129-r18-late-ramp/replays
A=$M/vm-20261129-r15-extrapolation/answers
cd $1
flock /tmp/specllama-heavy.lock bash -c "
for f in $M/vm-20261126-greedy-answers/{heldout,tuning,copy,unseen,unseen2,unseen4,agentic,agentic-heldout}.json $M/xeon-20261127-sampled-answers/{heldout-s1,unseen-s1,unseen-s2,tuning-s1,unseen-s3,unseen-s4,unseen-s5,heldout-s2,copy-s1,tuning-s2}.json $A/unseen6-{greedy,s11,s12}.json; do
  echo \"\$(basename \$f .json) \$(/work/main/.venv/bin/python scripts/measure/policy_replay.py \$f --modes none,suffix --repeat 2 \
      --verify-rows $M/vm-20261126-verify-rows-dense.json --noise 0.1 --noise-seed 1 --fresh-costs 2>&1 | grep '^suffix:')\"
done" > $R/s-$2.txt
