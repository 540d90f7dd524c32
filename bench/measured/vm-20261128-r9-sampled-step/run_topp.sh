#!/bin/bash
# Judging a plain step with filters, timed inside real runs (scripts/measure/judge_split.py), base (3291e8c)
# and new in turn, 2 rounds, a code prompt and a prose one: `judge_split.py run --no-draft --temp 0.7
# --top-p 0.95 --seed 3 -n 128 -t 2 PROMPT` (topp-*), and with FILTERS="--temp 0.8 --top-k 40 --top-p 0.95
# --min-p 0.05" OUT=topk (Ollama-style settings). Base uses this checkout's judge_split.py, ask_split.py and
# trace_drafts.py copied into /tmp/base. Output: OUT-KIND-VERSION-rN.txt.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
cp "$REPO"/scripts/measure/{judge_split,ask_split,trace_drafts}.py /tmp/base/scripts/measure/
declare -A PROMPTS=(
    [code]="Write a Python function that reads a CSV file and returns the average of a named numeric column, skipping empty cells."
    [prose]="Write a short story about a lighthouse keeper who finds a message in a bottle."
)
FILTERS=${FILTERS:---temp 0.7 --top-p 0.95}
OUT=${OUT:-topp}
cd /tmp
for kind in code prose; do
    for round in 1 2; do
        for v in base new; do
            code=/tmp/base; [ $v = new ] && code=$REPO
            flock /tmp/specllama-heavy.lock "$REPO/.venv/bin/python" "$code/scripts/measure/judge_split.py" run --no-draft \
                $FILTERS --seed 3 -n 128 -t 2 -q "${PROMPTS[$kind]}" > "$HERE/$OUT-$kind-$v-r$round.txt" 2>&1
        done
    done
done
