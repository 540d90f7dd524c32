#!/bin/bash
# usage: all.sh WORKTREE LABEL SEED: both set lists
$(dirname "$0")/noisy.sh "$1" "$2" "$3"; $(dirname "$0")/noisy2.sh "$1" "$2" "$3"
