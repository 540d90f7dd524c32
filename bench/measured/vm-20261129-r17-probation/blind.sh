#!/bin/bash
# usage: blind.sh TREE LABEL: the ninth blind set's recorded answers (greedy, 0.7 seed 22) replayed from fresh costs
# on this CPU's dense costs with noise 0.1 (seeds 1-3) and on the costs the greedy-2-new run learnt (exact); TREE: a
# directory holding the code (/tmp/v0: before the probation; /work/main: with it); one line each into
# replays/blind9-LABEL.txt
M=/work/main/bench/measured
D=$M/vm-20261129-r17-probation
cd $1
for a in greedy s22; do
  for s in 1 2 3; do
    r=$(nice /work/main/.venv/bin/python scripts/measure/policy_replay.py $D/answers/unseen9-$a.json --fresh-costs --modes none,auto \
        --repeat 2 --verify-rows $M/vm-20261126-verify-rows-dense.json --noise 0.1 --noise-seed $s 2>&1 | grep '^auto:')
    echo "unseen9-$a amd-noise-$s $r"
  done
  r=$(nice /work/main/.venv/bin/python scripts/measure/policy_replay.py $D/answers/unseen9-$a.json --fresh-costs --modes none,auto \
      --repeat 2 --curve $D/unseen9-greedy-2-new.json --prefill-ms 25 2>&1 | grep '^auto:')
  echo "unseen9-$a today-curve $r"
done > $D/replays/blind9-$2.txt
