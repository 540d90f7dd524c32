#!/bin/bash
# usage: blind.sh WORKTREE LABEL: the eighth blind set's recorded answers (greedy, 0.7 seed 21) replayed from fresh
# costs, on this CPU's dense costs with noise 0.1 (seeds 1-3) and on the costs the greedy-2-new run learnt
# (exact); one line each into replays/blind-LABEL.txt
M=/work/main/bench/measured
D=$M/vm-20261129-r16-short-of-a-block
cd /tmp/$1
for a in greedy s21; do
  for s in 1 2 3; do
    r=$(nice /work/main/.venv/bin/python scripts/measure/policy_replay.py $D/answers/unseen8-$a.json --fresh-costs --modes none,auto \
        --repeat 2 --verify-rows $M/vm-20261126-verify-rows-dense.json --noise 0.1 --noise-seed $s 2>&1 | grep '^auto:')
    echo "unseen8-$a amd-noise-$s $r"
  done
  r=$(nice /work/main/.venv/bin/python scripts/measure/policy_replay.py $D/answers/unseen8-$a.json --fresh-costs --modes none,auto \
      --repeat 2 --curve $D/greedy-2-new.json --prefill-ms 25 2>&1 | grep '^auto:')
  echo "unseen8-$a today-curve $r"
done > $D/replays/blind-$2.txt
