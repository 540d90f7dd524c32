#!/bin/bash
# Cross-prompt drafting on a batch job: `specllama batch bench/prompts_similar.jsonl` with
# --drafter none and auto, interleaved, for each --parallel value, ROUNDS rounds; prints each run's
# job tokens/s over its wall time (model load included, alike for both) and whether the texts match.
#   PARALLEL="1 auto" ROUNDS=2 ./scripts/measure/batch_similar.sh [OUT_DIR]
set -u
cd "$(dirname "$0")/../.."
out=${1:-$(mktemp -d)}
mkdir -p "$out"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for par in ${PARALLEL:-1 auto}; do
    for dr in none auto; do
      f=$out/$dr-p$par-$round.jsonl
      rm -f "$f"
      t0=$(date +%s.%N)
      OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m specllama batch bench/prompts_similar.jsonl -o "$f" \
        --pair qwen2.5-coder --drafter "$dr" --parallel "$par" --max-tokens 96 > "$out/log-$dr-p$par-$round.txt" 2>&1
      rc=$?
      t1=$(date +%s.%N)
      .venv/bin/python - "$f" "$t0" "$t1" "$dr" "$par" "$round" "$rc" <<'PY'
import json, sys
f, t0, t1, dr, par, rnd, rc = sys.argv[1:]
recs = [json.loads(line) for line in open(f)]
tok, wall = sum(r["tokens"] for r in recs), float(t1) - float(t0)
d, a = sum(r.get("drafted") or 0 for r in recs), sum(r.get("accepted") or 0 for r in recs)
print(f"round {rnd} --parallel {par} --drafter {dr}: {len(recs)} prompts, {tok} tokens, {wall:.1f} s wall "
      f"(load included), {tok / wall:.2f} tok/s, drafted {d}, accepted {a}, rc {rc}")
PY
    done
  done
done
.venv/bin/python - "$out" <<'PY'
import glob, json, sys
runs = {f: {r["id"]: r["text"] for r in map(json.loads, open(f))} for f in sorted(glob.glob(sys.argv[1] + "/*.jsonl"))}
base_file = next(f for f in runs if "/none-" in f)
base = runs[base_file]
for f, texts in runs.items():
    print(f.split("/")[-1], "identical to", base_file.split("/")[-1] + ":", sum(texts.get(i) == t for i, t in base.items()), "/", len(base))
PY
