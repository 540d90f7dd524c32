#!/bin/bash
# Judging a plain sampled step, timed inside real runs (scripts/measure/judge_split.py), base (3291e8c)
# and new in turn, 2 rounds a temperature: `judge_split.py bench --prompts P4 --configs none -n 64
# --repeat 1 --temp T --seed 7 -t 2`, P4 = bench/prompts_heldout.jsonl's first 4 prompts. The base runs
# use this checkout's judge_split.py, ask_split.py and trace_drafts.py copied into /tmp/base (their
# parts that base has not show "-"). Output: split-T-VERSION-rN.txt beside this file.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
head -4 "$REPO/bench/prompts_heldout.jsonl" > /tmp/heldout-first4.jsonl
cp "$REPO"/scripts/measure/{judge_split,ask_split,trace_drafts}.py /tmp/base/scripts/measure/
cd /tmp
for t in 0.7 1.0 1.5; do
    for round in 1 2; do
        for v in base new; do
            code=/tmp/base; [ $v = new ] && code=$REPO
            flock /tmp/specllama-heavy.lock "$REPO/.venv/bin/python" "$code/scripts/measure/judge_split.py" bench \
                --prompts /tmp/heldout-first4.jsonl --configs none -n 64 --repeat 1 --temp $t --seed 7 -t 2 -q \
                > "$HERE/split-$t-$v-r$round.txt" 2>&1
        done
    done
done
