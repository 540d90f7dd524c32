#!/bin/bash
# plain decode tok/s with a ~1800-token prompt: specllama run vs llama-server, interleaved
cd "$(dirname "$0")/../.."
M=${SPECLLAMA_CACHE:-$HOME/.cache/specllama}/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
LS=${1:?usage: scripts/measure/long_prompt_plain.sh PATH-TO-llama-server}
P="$(sed -n 1,400p specllama/decoding/engine.py | head -c 6500)
Summarise what this module does, then list its classes."
$LS -m $M -t 2 -c 4096 --port 18222 > /tmp/measure_long_prompt_ls.log 2>&1 &
LSP=$!
for i in $(seq 60); do curl -s 127.0.0.1:18222/health | grep -q ok && break; sleep 1; done
body=$(python3 -c 'import json,sys; print(json.dumps({"messages":[{"role":"user","content":sys.argv[1]}],"max_tokens":128,"temperature":0,"cache_prompt":False}))' "$P")
for r in 1 2 3; do
  SPECLLAMA_THREAD_WAIT=spin .venv/bin/specllama run --drafter none -n 128 --stats -t 2 -c 4096 "$P" 2>&1 >/dev/null | grep -E "tok/s" | tr '\n' ' '; echo
  curl -s 127.0.0.1:18222/v1/chat/completions -H 'content-type: application/json' -d "$body" | python3 -c 'import json,sys; t=json.load(sys.stdin)["timings"]; print("llama-server", t["prompt_n"], "prompt", round(t["prompt_per_second"],1), "gen", round(t["predicted_per_second"],2), t["predicted_n"])'
done
kill $LSP
