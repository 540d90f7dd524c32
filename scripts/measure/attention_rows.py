"""What a decode of n rows costs at a given cache fill with llama.cpp's flash attention on and off:
a bare llama-cpp-python loop (logits at every row, as verification asks), the default pair's
target, 2 threads, medians of REPS interleaved rounds. llama/attention.py quotes its output.

    flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/attention_rows.py FA FILL ROWS REPS
    e.g. ... attention_rows.py 0 4096 1,2,4,8,16,32,64 4      (FA: 1 on, 0 off)
"""
import os, sys, time, statistics
import llama_cpp as L
M = os.path.expanduser("~/.cache/specllama/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
fa = int(sys.argv[1]); fill = int(sys.argv[2]); ns = [int(x) for x in sys.argv[3].split(",")]; reps = int(sys.argv[4])
L.llama_backend_init()
mp = L.llama_model_default_params()
model = L.llama_load_model_from_file(M.encode(), mp)
cp = L.llama_context_default_params(); cp.n_ctx = fill + 128; cp.n_batch = 512; cp.n_ubatch = 512; cp.n_threads = 2; cp.n_threads_batch = 2
cp.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_ENABLED if fa else L.LLAMA_FLASH_ATTN_TYPE_DISABLED
ctx = L.llama_new_context_with_model(model, cp)
mem = L.llama_get_memory(ctx)
batch = L.llama_batch_init(512, 0, 1)
def decode(tokens, pos0, all_logits):
    batch.n_tokens = len(tokens)
    for i, t in enumerate(tokens):
        batch.token[i] = t; batch.pos[i] = pos0 + i; batch.n_seq_id[i] = 1; batch.seq_id[i][0] = 0
        batch.logits[i] = all_logits or i == len(tokens) - 1
    assert L.llama_decode(ctx, batch) == 0
t0 = time.perf_counter()
for s in range(0, fill, 512):
    decode([100 + (i * 7) % 5000 for i in range(s, min(fill, s + 512))], s, False)
pf = time.perf_counter() - t0
res = {}
for rep in range(reps):
    for n in ns:
        toks = [200 + (i * 13) % 5000 for i in range(n)]
        t = time.perf_counter(); decode(toks, fill, True); dt = time.perf_counter() - t
        L.llama_memory_seq_rm(mem, 0, fill, -1)
        res.setdefault(n, []).append(dt * 1000)
t1 = statistics.median(res[1])
print(f"fa={fa} fill={fill} prefill {fill/pf:.1f} tok/s; " + "  ".join(f"T({n})={statistics.median(res[n]):.0f}ms x{statistics.median(res[n])/t1:.2f}" for n in ns), flush=True)
