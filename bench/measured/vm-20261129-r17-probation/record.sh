#!/bin/bash
# The ninth blind set's answers, recorded once with the real target (2-core AMD VM, 2026-11-29) after its real runs,
# for replays: greedy, and at 0.7 with seed 22 (the seed of this folder's real 0.7 runs on it), 96 tokens.
cd "$(git rev-parse --show-toplevel)"
A=bench/measured/vm-20261129-r17-probation/answers
mkdir -p $A
.venv/bin/python scripts/measure/policy_replay.py --record bench/prompts_unseen9.jsonl $A/unseen9-greedy.json
.venv/bin/python scripts/measure/policy_replay.py --record bench/prompts_unseen9.jsonl --temp 0.7 --seed 22 $A/unseen9-s22.json
