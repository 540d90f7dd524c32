"""What a verify decode of n rows costs, in plain steps, through the engine's own DecodeContext
(logits at every row, as verification asks), for the row counts where llama.cpp's CPU kernels
step: every n to 17, then around each multiple of 16 (--rows for others), with or without flash
attention (--flash-attn on|off: bench/measured/vm-20261125-flash-attention, whose first runs used a
bare llama-cpp-python loop of the same shape, folded into this script since).

Why: on this 2-core machine the curve is not smooth. A batch of 16 rows cost less than one of 15,
32 less than 31, 64 less than 63 (the kernels work on blocks of rows; a partial block pays nearly
a whole one). A copy that drafts 16 tokens (17 rows) pays a block for its last token; 15 drafts
(16 rows) carry one token less for about 15 % less time. Each row count is timed on top of the
same cache fill, interleaved within each round, medians.

    flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/verify_rows.py --rounds 5 \
        --out bench/measured/vm-20261125-verify-rows
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts" / "measure"))

from report_files import measured_model, write_report  # noqa: E402

from specllama.llama.attention import CHOICES  # noqa: E402
from specllama.llama.backend import default_threads  # noqa: E402
from specllama.llama.context import DecodeContext  # noqa: E402
from specllama.llama.machine import cpu_model  # noqa: E402
from specllama.llama.model import GGUFModel  # noqa: E402

ROWS = [1, 2, 3, 4, 6, 8, 9, 12, 15, 16, 17, 24, 31, 32, 33, 48, 63, 64, 65]


def time_rows(ctx: DecodeContext, n: int, fill: int) -> float:
    tokens = [1000 + (i * 13) % 4000 for i in range(n)]
    start = time.perf_counter()
    ctx.decode(tokens, logits="all")
    elapsed = time.perf_counter() - start
    ctx.rollback(fill)
    return elapsed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a GGUF path or registry name (default: the default pair's target)")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: all cores)")
    ap.add_argument("--fill", type=int, default=300, help="tokens in the cache under every batch (default 300)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--rows", help="row counts to time, comma-separated (default: every n to 17, then around each 16th)")
    ap.add_argument("--flash-attn", choices=CHOICES, default="auto",
                    help="the context's attention, as --flash-attn (llama/attention.py; default auto)")
    ap.add_argument("--out", help="write OUT.md and OUT.json")
    args = ap.parse_args(argv)

    path = measured_model(args.model)
    threads = args.threads or default_threads()
    model = GGUFModel(path)
    sizes = sorted({1, *(int(n) for n in args.rows.split(","))}) if args.rows else ROWS  # ratios are to T(1)
    ctx = DecodeContext(model, n_ctx=args.fill + max(sizes) + 16, n_threads=threads, flash_attn=args.flash_attn)
    start = time.perf_counter()
    ctx.decode([500 + (i * 7) % 4000 for i in range(args.fill)], logits="none")
    prefill = args.fill / (time.perf_counter() - start)
    for n in sizes:  # warm-up: the first decode of each shape allocates
        time_rows(ctx, n, args.fill)
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for r in range(args.rounds):
        for n in (sizes if r % 2 == 0 else sizes[::-1]):
            times[n].append(time_rows(ctx, n, args.fill))
    ctx.close()

    t1 = statistics.median(times[1])
    rows = []
    for n in sizes:
        med = statistics.median(times[n])
        rows.append({"rows": n, "ms": round(med * 1e3, 1), "ratio": round(med / t1, 2),
                     "rows_per_s": round(n / med, 1), "rounds_ms": [round(t * 1e3, 1) for t in times[n]]})
    head = (f"{Path(path).name}; {cpu_model()}, {threads} threads, thread wait "
            f"{os.environ.get('SPECLLAMA_THREAD_WAIT', 'auto')}; flash attention {ctx.flash_attn}; cache fill {args.fill} "
            f"(prefilled at {prefill:.1f} tok/s); logits at every row; "
            f"{args.rounds} interleaved rounds, medians")
    print(head)
    lines = ["| rows | ms | T(n)/T(1) | rows/s |", "|---|---|---|---|"]
    lines += [f"| {r['rows']} | {r['ms']} | {r['ratio']} | {r['rows_per_s']} |" for r in rows]
    print("\n".join(lines))
    if args.out:
        write_report(args.out, "Verify batch cost by row count", "verify_rows.py", argv, head, lines, {"rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
