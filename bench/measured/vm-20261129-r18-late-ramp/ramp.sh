#!/bin/bash
# usage: ramp.sh LABEL ENV...: the 21 recorded sets x noise seeds 1-3, AMD dense costs, fresh costs (r16's sets.sh,
# which writes ../vm-20261129-r16-short-of-a-block/replays/n-r18-LABEL-SEED.txt; moved here into replays/ after), then
# r14's replays.sh on the H200's and the r13 slow VM's learnt curves (replays/x-LABEL-h200.txt, x-LABEL-slow.txt), on
# /tmp/vr: a worktree of ff9ebd5 with variant-ramp.diff applied
label=$1; shift
M=/work/main/bench/measured; R=$M/vm-20261129-r18-late-ramp
for s in 1 2 3; do env "$@" bash $M/vm-20261129-r16-short-of-a-block/sets.sh vr r18-$label $s --fresh-costs
  mv $M/vm-20261129-r16-short-of-a-block/replays/n-r18-$label-$s.txt $R/replays/; done
for c in h200 slow; do env "$@" bash $M/vm-20261128-r14-*/replays.sh vr $c > $R/replays/x-$label-$c.txt; done
