#!/usr/bin/env bash
# Reproduce docs/benchmarks.md's benchmark table: the default pair (Qwen2.5-Coder 1.5B target, 0.5B draft)
# on bench/prompts.jsonl, every configuration against plain decoding, greedy.
#
#   ./scripts/measure/bench_default_pair.sh                 # results in bench/results/<host>-<date>.{json,md}
#   MAX_TOKENS=64 REPEAT=1 ./scripts/measure/bench_default_pair.sh      # quicker, noisier
#   CONFIGS="none;model:k=3;auto:k=auto" ./scripts/measure/bench_default_pair.sh
#   ./scripts/measure/bench_default_pair.sh --threads 1    # extra arguments go to `specllama bench`
#
# About 20 minutes on a 2-core CPU with the defaults (12 prompts x 12 configurations x 96 tokens).
# Leave the machine otherwise idle: with 2 threads on 2 cores, any other busy process slows decoding
# 5-40x (measured on the 2-core development machine: OpenMP spin barriers, 3 s per token at worst;
# the OMP_WAIT_POLICY=PASSIVE set below limits it); the interleaved order spreads that noise, it
# cannot remove it.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out_dir=${OUT_DIR:-$repo/bench/results}
stem=$out_dir/$(hostname -s 2>/dev/null || echo host)-$(date +%Y%m%d-%H%M)
mkdir -p "$out_dir"

# setup.sh installs (or reuses) the venv and llama-cpp-python built for this CPU, sets
# OMP_WAIT_POLICY=PASSIVE, then runs `specllama ARGS`. The models are fetched on first use.
status=0
"$repo/scripts/setup.sh" start bench \
    --prompts "${PROMPTS:-$repo/bench/prompts.jsonl}" \
    --pair "${PAIR:-qwen2.5-coder}" \
    --configs "${CONFIGS:-none;model:k=1;model:k=2;model:k=3;model:k=4;model:k=6;suffix:k=2;suffix:k=4;suffix:k=6;model:k=auto;suffix:k=auto;auto:k=auto;model:k=4,verify=stairs}" \
    --max-tokens "${MAX_TOKENS:-96}" \
    --repeat "${REPEAT:-1}" \
    --json "$stem.json" --markdown "$stem.md" \
    "$@" || status=$?

# Exit status 1 means a configuration failed or a greedy output differed from plain decoding:
# the tables are still written and say which.
if [[ -f $stem.md ]]; then
    echo
    echo "wrote $stem.json and $stem.md (paste the .md table into docs/benchmarks.md)"
fi
exit "$status"
