#!/usr/bin/env bash
# Issue 42's three figures on the lent device (16 Xeon cores, one H100 or H200), in one call after
# ../shared/device's recipe (boot, pieces, assemble): plain decoding against llama-server, `auto`
# against plain on held-out prompts (greedy and --temp 0.7, fresh cost caches), and the agentic
# replay beside llama-server plain and --spec-default; first with every layer on the GPU, then on
# the 16 CPU threads alone (CUDA_VISIBLE_DEVICES= hides the GPU from both programs, so nothing is
# offloaded behind -ngl 0's back); last, time allowing, the held-out agent sessions on the GPU and
# what a step costs in Python there (step_python.py: the simulator's --propose-ms for that machine).
# Results go to $OUT/results.tgz after every step (a step cut off by the call's limit loses only
# itself) and the log to $OUT/log.txt.
#   bash scripts/measure/device_figures.sh [gpu|cpu|all|shapes|argmax]      (ONLY_REPLAY=1: the replays alone)
# argmax: the GPU figures with greedy rows' argmax taken on the GPU (SPECLLAMA_BACKEND_ARGMAX=1), to set
# beside a `gpu` run of the same sitting.
# shapes: what a verify batch costs on the GPU when its row count changes from step to step, with CUDA
# graphs, without them, and with the argmax taken on the device (verify_shapes.py; ~1 minute).
# Beyond prepare.sh's wheels the device needs (EXTRA_WHEELS): shtab starlette uvicorn openai pydantic
# pydantic-core annotated-types typing-inspection jiter distro sniffio httpx2 httpcore2 truststore h11
# anyio idna certifi tqdm typing-extensions; and every call after the first carries
# .device/kit/env.sh again (ignored paths a call does not carry are removed there).
# Times at the first sitting (2026-11-26, bench/measured/lent-20261126-*): the GPU part ~75 s, the CPU
# part ~200 s. The second (lent-20261126-r2-*), as this file runs now: ~7 minutes for all, after a
# 2.5-minute wait for the CUDA build; with the boot and 29 model pieces of 56 MiB (a call carries the tree
# too: 62 MiB pieces were refused) it took 775 s of the session's 900. The fourth (lent-20261127-r2-*, an H200,
# 30 s of idle before a machine goes back): pieces of 55 MiB (the tree is ~8 MB now: `split -b 55M` after
# prepare.sh), 28 calls of ~6 s each, then `assemble.sh && device_figures.sh gpu` in one call (321 s, the
# CUDA build still running for the first ~150 s of it), then `cpu` (267 s): 807 s of 900, no time for argmax.
set -u
. .device/kit/env.sh
unset OMP_WAIT_POLICY  # env.sh's PASSIVE: the figures are at full speed (specllama's default; libgomp's for llama-server)
R=/root/w/res; mkdir -p "$R"; exec > >(tee -a "$OUT/log.txt") 2>&1
M=scripts/measure
save() { tar czf "$OUT/results.tgz" -C /root/w res; }
step() {  # step SECONDS NAME COMMAND...: a step's own limit, its time in the log
  local limit=$1 name=$2; shift 2; echo "=== $name ($(date +%T), limit ${limit}s)"
  local t0=$SECONDS; timeout -k 5 "$limit" "$@"; echo "=== $name: rc $? in $((SECONDS - t0)) s"; save
}
figures() {  # figures LABEL NOTE REPEAT ROUNDS [PLAIN_ROUNDS (default ROUNDS)]
  local L=$1 note=$2 rep=$3 rounds=$4 plain_rounds=${5:-$4}
  # The default is libgomp's own 300,000-PAUSE spin since 8d33260 (the first sitting's 1,000 had ours at
  # 0.924x of llama-server on the 16 threads), so one arm.
  local arms=default
  [ -n "${ONLY_REPLAY:-}" ] || step $((40 + 45 * plain_rounds)) "$L plain vs llama-server" python3 $M/thread_wait.py --arms $arms \
    --llama-server "$B/llama-server" --target "$T" --threads 16 --rounds "$plain_rounds" --note "$note" --out "$R/$L-plain"
  # At 0.7 the JSON's time_split python share is the sampled step's Python: 23 % of plain decoding's time at the
  # fourth sitting (lent-20261127-r2-gpu-heldout-t0.7), before the cut of bench/measured/vm-20261128-r9-sampled-step.
  # machine.draft_catch_up says which way the draft caught up and what each cost a position (catch_up.py's trial),
  # and c beside T(1) what a draft position cost: 2.5-3.5 target steps at every earlier sitting, merged.
  [ -n "${ONLY_REPLAY:-}" ] || for temp in 0 0.7; do
    step 150 "$L held-out temp $temp" env SPECLLAMA_COSTS="$(mktemp -d)" python3 -m specllama bench \
      --prompts bench/prompts_heldout.jsonl --configs "none;auto:k=auto" -n 96 --repeat "$rep" --temp $temp --seed 7 \
      -m "$T" -md "$D" -t 16 --json "$R/$L-heldout-t$temp.json" --markdown "$R/$L-heldout-t$temp.md"
  done
  step 240 "$L agentic replay" python3 $M/bench_serve.py --parts agentic --rounds "$rounds" --modes auto,none --threads 16 \
    --llama-server "$B/llama-server" --target "$T" --note "$note" --out "$R/$L-replay" -- -m "$T" -md "$D"
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; lscpu | grep -E 'Model name'
GPU="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), every layer on the GPU (CUDA build of the vendored llama.cpp)"
shapes() {
  local V="python3 $M/verify_shapes.py --model $T --gpu-layers -1 --threads 16"
  step 90 "verify shapes, graphs" $V --json "$R/shapes-graphs.json"
  step 90 "verify shapes, no graphs" env GGML_CUDA_DISABLE_GRAPHS=1 $V --json "$R/shapes-nographs.json"
  step 90 "verify shapes, argmax on the device" $V --backend-greedy --json "$R/shapes-backend-greedy.json"
  # The draft's catch-up ways (decoding/catch_up.py): loop (merged) against split, with CUDA graphs.
  step 90 "draft decode shapes" sh -c "python3 $M/decode_shapes.py --model $D --gpu-layers -1 --threads 16 \
    > $R/draft-shapes.txt; cat $R/draft-shapes.txt"
}
case ${1:-all} in
  shapes) shapes ;;
  argmax) export SPECLLAMA_BACKEND_ARGMAX=1  # greedy rows' argmax on the GPU (llama/device_argmax.py): ours only
          figures gpu-argmax "$GPU; specllama with SPECLLAMA_BACKEND_ARGMAX=1" 3 2 ;;
  gpu) figures gpu "$GPU" 3 2 ;;
  # On 16 threads one round of plain decoding gave 1.053x of llama-server at the second sitting and 0.901x at the
  # fourth (lent-20261127-r2-cpu-plain): 3 rounds of it (~40 s each), the rest once.
  cpu) export CUDA_VISIBLE_DEVICES=; figures cpu "16 CPU threads, the GPU hidden (CUDA_VISIBLE_DEVICES=)" 1 1 3 ;;
  all) figures gpu "$GPU" 3 2
       ( export CUDA_VISIBLE_DEVICES=; figures cpu "16 CPU threads, the GPU hidden (CUDA_VISIBLE_DEVICES=)" 1 1 3 )
       step 120 "gpu held-out sessions replay" python3 $M/bench_serve.py --parts agentic --rounds 2 --modes auto,none \
         --threads 16 --sessions-file bench/agent_sessions_heldout.json --llama-server "$B/llama-server" --target "$T" \
         --note "$GPU; the held-out agent sessions" --out "$R/gpu-replay-heldout" -- -m "$T" -md "$D"
       step 60 "step python" sh -c "python3 $M/step_python.py --set heldout --modes none,auto --repeat 3 > $R/step-python.txt; \
         python3 $M/step_python.py --set agentic --modes none,auto --repeat 3 >> $R/step-python.txt; cat $R/step-python.txt" ;;
esac
