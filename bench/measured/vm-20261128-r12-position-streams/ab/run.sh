#!/bin/bash
# A/B at --temp 0.7 on the tuning prompts: base (82aaa02) and new (a778639) in turn, fresh cost caches.
OUT=/tmp/r12/ab
one() { # arm round
  local code=/tmp/base12; [ "$1" = new ] && code=/tmp/new12
  (cd /tmp && SPECLLAMA_COSTS=$(mktemp -d) PYTHONPATH=$code /work/main/.venv/bin/python -m specllama bench \
     --prompts /work/main/bench/prompts.jsonl --configs "none;auto:k=auto" -n 96 --repeat 2 --temp 0.7 --seed 7 -t 2 \
     --json $OUT/$1-r$2.json > $OUT/$1-r$2.txt 2> $OUT/$1-r$2.err)
}
one base 1; one new 1; one new 2; one base 2; one base 3; one new 3
