"""What dropping a rejected draft's tail costs, by way back (llama/rollback.py), on the toy models
of tests/support/toy_models.py: cells (attention only), snapshots (qwen35, lfm2), checkpoints (mamba; and
qwen35 made without snapshots, to compare the two ways on one model).

Each round: a checkpoint where the way back needs one (timed apart), a verification-like decode of
[last] + K tokens, then the rollback of `drop` of them (timed); drop cycles 1..K. Prints the median
per rollback and per dropped token, and a one-token decode's time for scale.

    nice -n 19 python scripts/measure/rollback_cost.py --tokenizer-from QWEN.gguf [--rounds 60]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specllama.llama.context import DecodeContext  # noqa: E402
from specllama.llama.model import GGUFModel  # noqa: E402
from tests.support.toy_models import write_toy_model  # noqa: E402

K = 6


def measure(model: GGUFModel, rounds: int, n_past: int, **ctx_args) -> dict:
    ctx = DecodeContext(model, n_ctx=n_past + 4 * K + rounds * (K + 2), n_threads=1, exact=True, **ctx_args)
    ctx.decode([1000 + i % 5000 for i in range(n_past)], logits="none")
    ctx.checkpoint(0)
    one, prepare, back, per_token = [], [], [], []
    for r in range(rounds):
        t0 = time.perf_counter()
        ctx.decode([2000 + r], logits="last")
        one.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        ctx.prepare_rollback(0, K)
        prepare.append(time.perf_counter() - t0)
        ctx.decode([3000 + r * K + i for i in range(K + 1)], logits="all")
        drop = 1 + r % K
        t0 = time.perf_counter()
        ctx.rollback(ctx.n_past - drop)
        seconds = time.perf_counter() - t0
        back.append(seconds)
        per_token.append(seconds / drop)
    result = {"method": ctx.rollback_method, "t1_ms": 1e3 * statistics.median(one),
              "checkpoint_ms": 1e3 * statistics.median(prepare), "rollback_ms": 1e3 * statistics.median(back),
              "per_token_ms": 1e3 * statistics.median(per_token), "replayed": ctx.replayed_tokens}
    ctx.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer-from", required=True, type=Path)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--n-past", type=int, default=256)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for arch in ("llama", "qwen35", "lfm2", "mamba"):
            model = GGUFModel(write_toy_model(Path(tmp) / f"{arch}.gguf", arch, args.tokenizer_from), exact=True)
            rows.append((arch, measure(model, args.rounds, args.n_past)))
            if arch == "qwen35":
                rows.append(("qwen35 (no snapshots)", measure(model, args.rounds, args.n_past, snapshot_depth=0)))
    print(f"rollback of 1..{K} drafted tokens after a decode of {K + 1}, cache at {args.n_past}+ tokens, 1 thread, "
          f"{args.rounds} rounds (medians)")
    print(f"{'toy':24} {'way back':12} {'decode 1':>9} {'checkpoint':>11} {'rollback':>9} {'per token':>10} {'replayed':>9}")
    for arch, r in rows:
        print(f"{arch:24} {r['method']:12} {r['t1_ms']:8.3f}ms {r['checkpoint_ms']:10.3f}ms {r['rollback_ms']:8.3f}ms "
              f"{r['per_token_ms']:9.3f}ms {r['replayed']:9d}")


if __name__ == "__main__":
    main()
