#!/bin/bash
# The answers replayed here, recorded once with the real target (2-core AMD VM, 2026-11-29):
# bench/prompts_unseen6.jsonl at 0.7 (seeds 11 and 12, the seeds of the r14 bench runs) and greedy, 96 tokens.
cd "$(git rev-parse --show-toplevel)"
A=bench/measured/vm-20261129-r15-extrapolation/answers
for s in 11 12; do
  .venv/bin/python scripts/measure/policy_replay.py --record bench/prompts_unseen6.jsonl --temp 0.7 --seed $s $A/unseen6-s$s.json
done
.venv/bin/python scripts/measure/policy_replay.py --record bench/prompts_unseen6.jsonl $A/unseen6-greedy.json
