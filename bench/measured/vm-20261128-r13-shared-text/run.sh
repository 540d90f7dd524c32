#!/usr/bin/env bash
# The runs of this folder's README, one at a time under the heavy-work lock: each from a fresh cost cache.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=bench/measured/vm-20261128-r13-shared-text
run() {  # name, prompts, temperature, seed
    SPECLLAMA_COSTS=$(mktemp -d) .venv/bin/python -m specllama bench --prompts "$2" --configs "none;auto:k=auto" \
        -n 96 --repeat 3 --temp "$3" --seed "$4" -t 2 --json "$out/$1.json" > "$out/$1.txt" 2>&1
}
for job in "$@"; do
    case $job in
        unseen5-t0.7-s7) run "$job" bench/prompts_unseen5.jsonl 0.7 7 ;;
        unseen5-t0.7-s9) run "$job" bench/prompts_unseen5.jsonl 0.7 9 ;;
        unseen5-t0) run "$job" bench/prompts_unseen5.jsonl 0 7 ;;
        heldout-t0.7-s7) run "$job" bench/prompts_heldout.jsonl 0.7 7 ;;
        *) echo "unknown job $job" >&2; exit 2 ;;
    esac
done
