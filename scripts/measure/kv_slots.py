#!/usr/bin/env python3
"""What a context's unused slots cost: creation time and resident memory by n_seq_max, and the
time of one decode of three sequences with equal and with uneven token counts.

Why it was measured: `batch --parallel auto` of three prompts allocated 16 slots and ran slower
and bigger than `--parallel 1` (issue 29). Each round makes a context of every size asked (rounds
interleave them), prefills three 60-token prompts into slots 0-2 and times STEPS decodes of each
shape, rolling the cache back after each. A shape [1, 1, 5] is three sequences decoding 1, 1 and 5
tokens in one llama_decode (what a speculative step of three prompts looks like).

    flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/kv_slots.py --slots 3 16 --rounds 3 \\
        --out bench/measured/NAME
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from report_files import measured_model  # noqa: E402

from specllama.llama.backend import default_threads  # noqa: E402
from specllama.llama.context import DecodeContext, DecodePart  # noqa: E402
from specllama.llama.kv_memory import kv_bytes_per_sequence  # noqa: E402
from specllama.llama.machine import cpu_model  # noqa: E402
from specllama.llama.model import GGUFModel  # noqa: E402

SHAPES = ([1, 1, 1], [1, 1, 5], [5, 5, 5], [5])


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def one_context(model: GGUFModel, slots: int, n_ctx: int, threads: int, steps: int) -> dict:
    before, start = rss_mb(), time.perf_counter()
    ctx = DecodeContext(model, n_ctx=n_ctx, n_seq_max=slots, n_threads=threads)
    made, after = time.perf_counter() - start, rss_mb()
    try:
        vocab = model.n_vocab
        for s in range(3):
            ctx.decode([(1000 + 37 * s + i) % vocab for i in range(60)], logits="none", seq=s)
        step_ms = {}
        for shape in SHAPES:
            t0 = time.perf_counter()
            for step in range(steps):
                ctx.decode_parts([DecodePart(s, [(2000 + s + step + j) % vocab for j in range(n)], "all")
                                  for s, n in enumerate(shape)])
                for s, n in enumerate(shape):
                    ctx.rollback(ctx.past(s) - n + 1, s)
            step_ms[str(shape)] = (time.perf_counter() - t0) / steps * 1000
        return {"slots": slots, "create_s": made, "rss_added_mb": after - before, "step_ms": step_ms}
    finally:
        ctx.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--slots", type=int, nargs="+", default=[3, 16])  # at least 3: three sequences decode
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("-c", "--ctx", type=int, default=4096)
    ap.add_argument("--model", help="a GGUF path or registry name (default: the default pair's target)")
    ap.add_argument("-t", "--threads", type=int, default=default_threads())
    ap.add_argument("--out", required=True, help="bench/measured/NAME (writes NAME.json and NAME.md)")
    args = ap.parse_args()
    path = measured_model(args.model)
    model = GGUFModel(path)
    runs = []
    for r in range(args.rounds):
        for slots in args.slots:
            run = one_context(model, slots, args.ctx, args.threads, args.steps)
            run["round"] = r
            runs.append(run)
            print(json.dumps(run), file=sys.stderr, flush=True)
    per_slot = kv_bytes_per_sequence(path, args.ctx)

    def med(slots: int, pick) -> float:
        return statistics.median(pick(x) for x in runs if x["slots"] == slots)

    record = {"command": " ".join(sys.argv), "machine": {"cpu": cpu_model(), "cores": os.cpu_count(),
              "threads": args.threads}, "model": path.name, "n_ctx": args.ctx, "rounds": args.rounds,
              "steps": args.steps, "kv_bytes_per_slot_estimate": per_slot, "runs": runs}
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
    md = [f"# Unused slots: what a context of n_seq_max sequences costs ({path.name}, --ctx {args.ctx})", "",
          f"Machine: {cpu_model()}, {os.cpu_count()} cores, {args.threads} threads. Medians of {args.rounds} "
          f"interleaved rounds; {args.steps} decodes per shape. Estimated KV cache per slot (kv_memory.py): "
          f"{per_slot / 1e6:.0f} MB.", "", f"Command: `{record['command']}`", "",
          "| slots | create s | RSS added MB | " + " | ".join(f"decode {s} ms" for s in SHAPES) + " |",
          "|---|---|---|" + "---|" * len(SHAPES)]
    for slots in args.slots:
        cells = [f"{med(slots, lambda x, s=s: x['step_ms'][str(s)]):.0f}" for s in SHAPES]
        md.append(f"| {slots} | {med(slots, lambda x: x['create_s']):.2f} | {med(slots, lambda x: x['rss_added_mb']):.0f} | "
                  + " | ".join(cells) + " |")
    out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
