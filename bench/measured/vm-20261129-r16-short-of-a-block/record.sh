#!/bin/bash
# The eighth blind set's answers, recorded once with the real target (2-core AMD VM, 2026-11-29), for replays:
# greedy, and at 0.7 with seed 21 (the seed of this folder's real 0.7 runs), 96 tokens.
cd "$(git rev-parse --show-toplevel)"
A=bench/measured/vm-20261129-r16-short-of-a-block/answers
.venv/bin/python scripts/measure/policy_replay.py --record bench/prompts_unseen8.jsonl $A/unseen8-greedy.json
.venv/bin/python scripts/measure/policy_replay.py --record bench/prompts_unseen8.jsonl --temp 0.7 --seed 21 $A/unseen8-s21.json
