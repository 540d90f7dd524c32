"""What a decode of n rows costs at a given cache fill with llama.cpp's flash attention on and off:
a bare llama-cpp-python loop (logits at every row, as verification asks), the default pair's
target, 2 threads, medians of REPS interleaved rounds. llama/attention.py quotes its output
(bench/measured/vm-20261125-flash-attention).

    flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/attention_rows.py FA FILL ROWS REPS
    e.g. ... attention_rows.py 0 4096 1,2,4,8,16,32,64 4      (FA: 1 on, 0 off)
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import llama_cpp as C

MODEL = os.path.expanduser("~/.cache/specllama/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")


def main() -> int:
    fa, fill = int(sys.argv[1]), int(sys.argv[2])
    rows, reps = [int(x) for x in sys.argv[3].split(",")], int(sys.argv[4])
    C.llama_backend_init()
    model = C.llama_model_load_from_file(MODEL.encode(), C.llama_model_default_params())
    params = C.llama_context_default_params()
    params.n_ctx, params.n_batch, params.n_ubatch = fill + 128, 512, 512
    params.n_threads = params.n_threads_batch = 2
    params.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_ENABLED if fa else C.LLAMA_FLASH_ATTN_TYPE_DISABLED
    ctx = C.llama_init_from_model(model, params)
    memory = C.llama_get_memory(ctx)
    batch = C.llama_batch_init(512, 0, 1)

    def decode(tokens: list[int], pos0: int, every_row: bool) -> None:
        batch.n_tokens = len(tokens)
        for i, t in enumerate(tokens):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = t, pos0 + i, 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = every_row or i == len(tokens) - 1
        assert C.llama_decode(ctx, batch) == 0

    start = time.perf_counter()
    for s in range(0, fill, 512):
        decode([100 + (i * 7) % 5000 for i in range(s, min(fill, s + 512))], s, False)
    prefill = fill / (time.perf_counter() - start)
    times: dict[int, list[float]] = {}
    for _ in range(reps):
        for n in rows:
            t = time.perf_counter()
            decode([200 + (i * 13) % 5000 for i in range(n)], fill, True)
            times.setdefault(n, []).append((time.perf_counter() - t) * 1000)
            C.llama_memory_seq_rm(memory, 0, fill, -1)
    t1 = statistics.median(times[rows[0]])
    print(f"fa={fa} fill={fill} prefill {prefill:.1f} tok/s; " + "  ".join(
        f"T({n})={statistics.median(times[n]):.0f}ms x{statistics.median(times[n]) / t1:.2f}" for n in rows), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
