#!/bin/bash
# Real interleaved A/B: A = d49f692 (/tmp/base), B = the working tree (/work/main). blind44, fresh costs each run.
cd /tmp
run() { # version temp tag
  local dir=/tmp/base; [ "$1" = B ] && dir=/work/main
  local costs=$(mktemp -d)
  echo "$(date -u +%H:%M:%S) start $1 t$2 $3" >> /tmp/ab/log.txt
  SPECLLAMA_COSTS=$costs PYTHONPATH=$dir flock /tmp/specllama-heavy.lock /work/main/.venv/bin/python -m specllama bench \
    --prompts /tmp/ab/blind44.jsonl --configs "none;auto:k=auto" -n 96 --repeat 1 --temp $2 --seed 7 -t 2 \
    --json /tmp/ab/$1-t$2-$3.json > /tmp/ab/$1-t$2-$3.txt 2>/tmp/ab/$1-t$2-$3.err
  echo "$(date -u +%H:%M:%S) done $1 t$2 $3 rc=$?" >> /tmp/ab/log.txt
}
run A 0 r3; run B 0 r3; run B 0.7 r3; run A 0.7 r3
run B 0 r4; run A 0 r4; run A 0.7 r4; run B 0.7 r4
