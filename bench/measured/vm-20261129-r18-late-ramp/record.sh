#!/bin/bash
# The tenth blind set's answers, recorded once with the real target (2-core AMD VM, 2026-11-29) after its greedy real
# runs, for replays and traces: greedy, and at 0.7 with seed 23 (the seed of this folder's 0.7 runs), 96 tokens.
cd "$(git rev-parse --show-toplevel)"
A=bench/measured/vm-20261129-r18-late-ramp/answers
mkdir -p $A
flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/policy_replay.py --record bench/prompts_unseen10.jsonl $A/unseen10-greedy.json
flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/policy_replay.py --record bench/prompts_unseen10.jsonl --temp 0.7 --seed 23 $A/unseen10-s23.json
