#!/bin/bash
# The runs of README.md, as run (2026-11-28/29, 2-core AMD VM). /tmp/v0 is a git worktree of ddc0283 (the code as
# shipped), /tmp/v2 the same with the slope floor of README.md section 2 (not kept); PYTHONPATH picks the tree.
cd "$(git rev-parse --show-toplevel)"
P=bench/prompts_unseen6.jsonl
run() { # tree seed temp out repeat
  SPECLLAMA_COSTS=$(mktemp -d) PYTHONPATH=/tmp/$1 .venv/bin/specllama bench --prompts $P --configs "none;auto:k=auto" \
    -n 96 --repeat $5 --temp $3 --seed $2 -t 2 --json $4.json > $4.txt 2>&1
}
# 0.7, ABBA: base s11, floor s11, floor s12, base s12; then greedy at the shipped code
run v0 11 0.7 base-s11 1
run v2 11 0.7 new-s11 1
run v2 12 0.7 new-s12 1
run v0 12 0.7 base-s12 1
run v0 0 0 base-greedy 2
# traces: the first five prompts, base and floor in turn twice (trace-first5-*.txt); all twelve at the shipped code
head -5 $P > /tmp/trace-prompts.jsonl
for v in v0 v2 v0 v2; do
  SPECLLAMA_COSTS=$(mktemp -d) PYTHONPATH=/tmp/$v .venv/bin/python scripts/measure/trace_drafts.py bench \
    --prompts /tmp/trace-prompts.jsonl --configs "none;auto:k=auto" -n 96 --repeat 1 --temp 0.7 --seed 12 -t 2 2>> trace-first5-$v.txt
done
SPECLLAMA_COSTS=$(mktemp -d) PYTHONPATH=/tmp/v0 .venv/bin/python scripts/measure/trace_drafts.py bench --prompts $P \
  --configs "none;auto:k=auto" -n 96 --repeat 1 --temp 0.7 --seed 11 -t 2 > trace12-s11-report.txt 2> trace12-s11.txt
