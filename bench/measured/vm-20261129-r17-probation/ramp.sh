#!/bin/bash
# usage: ramp.sh LABEL ENV...: the 21 recorded sets x noise seeds 1-3 from fresh costs (r16's sets.sh) on /tmp/vr (a
# worktree of ac98b68 with variant-ramp.diff applied) under the given RAMP_* environment; sets.sh writes
# ../vm-20261129-r16-short-of-a-block/replays/n-r17-LABEL-SEED.txt (moved here afterwards: replays/)
label=$1; shift
for s in 1 2 3; do env "$@" bash /work/main/bench/measured/vm-20261129-r16-short-of-a-block/sets.sh vr r17-$label $s --fresh-costs; done
