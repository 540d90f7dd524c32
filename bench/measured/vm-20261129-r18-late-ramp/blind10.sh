#!/bin/bash
# usage: blind10.sh TREE LABEL: the tenth blind set's recorded answers (record.sh: greedy, 0.7 seed 23) replayed from
# fresh costs on TREE (/tmp/v0: before the ramp; /tmp/vb: with it), this CPU's dense costs with noise 0.1 (seeds 1-3)
# and the curve the greedy-2-new run learnt (exact); one line each into replays/blind10-LABEL.txt
M=/work/main/bench/measured; D=$M/vm-20261129-r18-late-ramp
cd $1
for a in greedy s23; do
  for s in 1 2 3; do
    echo "unseen10-$a amd-noise-$s $(/work/main/.venv/bin/python scripts/measure/policy_replay.py $D/answers/unseen10-$a.json --fresh-costs \
      --modes none,auto --repeat 2 --verify-rows $M/vm-20261126-verify-rows-dense.json --noise 0.1 --noise-seed $s 2>&1 | grep '^auto:')"
  done
  echo "unseen10-$a today-curve $(/work/main/.venv/bin/python scripts/measure/policy_replay.py $D/answers/unseen10-$a.json --fresh-costs \
    --modes none,auto --repeat 2 --curve $D/unseen10-greedy-2-new.json --prefill-ms 25 2>&1 | grep '^auto:')"
done > $D/replays/blind10-$2.txt
