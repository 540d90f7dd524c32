#!/usr/bin/env bash
# What the engine's Python costs a step, in instructions rather than seconds: valgrind's callgrind
# counts every instruction of a policy_replay.py run (the real engine and drafters, the target faked),
# deterministically, so two commits compare exactly on a shared, noisy machine where the wall time of
# the same run moved by 2x between rounds (step_python.py, propose_cost.py). One replay's cost is a
# run of two replays minus a run of one (the imports and start-up cancel out).
#   bash scripts/measure/step_instructions.sh SET [MODE] [CHECKOUT...]
# SET: a file of bench/measured/vm-20261126-greedy-answers (heldout, agentic, ...); MODE: auto (default);
# CHECKOUT: the trees to compare (default: this one), e.g. a `git worktree add /tmp/base COMMIT`.
# About 2.5 minutes a tree and set (python runs ~50x slower under callgrind).
set -eu
set_name=$1; mode=${2:-auto}; shift $(( $# >= 2 ? 2 : 1 ))
here=$(cd "$(dirname "$0")/../.." && pwd)
python=${PYTHON:-$here/.venv/bin/python}
answers=$here/bench/measured/vm-20261126-greedy-answers/$set_name.json
runner=$(mktemp --suffix=.py)
trap 'rm -f "$runner"' EXIT
cat > "$runner" <<'EOF'
import json, sys
sys.path.insert(0, "scripts/measure")
import policy_replay
recorded = json.load(open(sys.argv[1]))
for _ in range(int(sys.argv[2])):
    policy_replay.prompt_runs(recorded, [sys.argv[3]], fresh=True)
EOF
count() {  # count TREE N: instructions of N replays in TREE
  (cd "$1" && PYTHONPATH="$1" valgrind --tool=callgrind --callgrind-out-file=/dev/null "$python" "$runner" "$answers" "$2" "$mode" 2>&1 \
    | awk '/I +refs/ {gsub(",", "", $NF); print $NF}')
}
for tree in "${@:-$here}"; do
  one=$(count "$tree" 1); two=$(count "$tree" 2)
  echo "$tree $set_name $mode: $(( (two - one) / 1000000 )) M instructions a replay"
done
