#!/bin/bash
# usage: wide.sh LABEL ENV...: on /tmp/vr (see ramp.sh) under the given environment, the replays beyond ramp.sh's:
# the eighth and ninth blind sets' recorded answers (greedy and at 0.7) from fresh costs, on this CPU's dense costs
# with noise 0.1 (seeds 1-3) and on the curve each set's own greedy run learnt (as r16's and r17's blind.sh), into
# replays/blind-LABEL.txt; and r16's slow-tail costs (as its slowtail.sh) into replays/st-LABEL.txt
label=$1; shift; vars=("$@")
M=/work/main/bench/measured; R=$M/vm-20261129-r18-late-ramp
replay() { env "${vars[@]}" nice /work/main/.venv/bin/python scripts/measure/policy_replay.py "$@" --fresh-costs --modes none,auto --repeat 2 2>&1 | grep '^auto:'; }
cd /tmp/vr
for b in "unseen8 greedy s21 $M/vm-20261129-r16-short-of-a-block answers/unseen8 greedy-2-new" \
         "unseen9 greedy s22 $M/vm-20261129-r17-probation answers/unseen9 unseen9-greedy-2-new"; do
  read set g t D ans curve <<< "$b"
  for a in $g $t; do
    for s in 1 2 3; do
      echo "$set-$a amd-noise-$s $(replay $D/$ans-$a.json --verify-rows $M/vm-20261126-verify-rows-dense.json --noise 0.1 --noise-seed $s)"
    done
    echo "$set-$a today-curve $(replay $D/$ans-$a.json --curve $D/$curve.json --prefill-ms 25)"
  done
done > $R/replays/blind-$label.txt
for f in $M/vm-20261126-greedy-answers/{heldout,tuning,similar,copy,unseen,unseen2,unseen3,unseen4,agentic,agentic-heldout}.json $M/xeon-20261127-sampled-answers/{heldout-s1,unseen-s1,unseen-s2,copy-s1,tuning-s1}.json; do
  echo "$(basename $f .json) $(replay $f --verify-rows $M/vm-20261129-r16-short-of-a-block/slow-tail.json)"
done > $R/replays/st-$label.txt
