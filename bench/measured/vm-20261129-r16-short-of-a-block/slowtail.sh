#!/bin/bash
v=$1; out=/work/main/bench/measured/vm-20261129-r16-short-of-a-block/replays/$2
M=/work/main/bench/measured
cd /tmp/$v 2>/dev/null || cd /work/main
for f in $M/vm-20261126-greedy-answers/{heldout,tuning,similar,copy,unseen,unseen2,unseen3,unseen4,agentic,agentic-heldout}.json $M/xeon-20261127-sampled-answers/{heldout-s1,unseen-s1,unseen-s2,copy-s1,tuning-s1}.json; do
  r=$(nice /work/main/.venv/bin/python scripts/measure/policy_replay.py $f --fresh-costs --modes none,auto --repeat 2 --verify-rows /work/main/bench/measured/vm-20261129-r16-short-of-a-block/slow-tail.json 2>&1 | grep '^auto:')
  echo "$(basename $f .json) $r"
done > $out
