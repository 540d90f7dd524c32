"""What a loaded MTP head costs a plain decode when it is not followed (llama/mtp.py follow off:
the target's states are still copied, a row each, so the head can catch up) against following it
and against a model loaded without the head: one-token decodes on the qwen35 toy of
tests/support/toy_models.py, interleaved rounds, medians. A toy's decode is mostly overhead, so
the absolute residual (microseconds a row) is what carries over to a real model, not the ratio.

    nice -n 19 python scripts/measure/mtp_pause_residual.py --tokenizer-from QWEN.gguf [--rounds 5]
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
from specllama.llama.mtp import MtpContext  # noqa: E402
from tests.support.toy_models import write_toy_model  # noqa: E402

TOKENS = 200


def per_decode(ctx: DecodeContext) -> float:
    """Median seconds of a one-token decode over TOKENS of them, after a short prompt."""
    ctx.clear()
    ctx.decode(list(range(100, 116)), logits="none")
    times = []
    for i in range(TOKENS):
        start = time.perf_counter()
        ctx.decode([200 + i % 50], logits="last")
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer-from", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    path = write_toy_model(Path(tempfile.mkdtemp()) / "toy-qwen35.gguf", "qwen35", args.tokenizer_from)
    bare = DecodeContext(GGUFModel(path), n_ctx=512, n_threads=1)
    with_head = DecodeContext(GGUFModel(path, load_mtp=True), n_ctx=512, n_threads=1)
    head = MtpContext(with_head)
    results: dict[str, list[float]] = {"no head loaded": [], "head followed": [], "head not followed": []}
    for _ in range(args.rounds):
        results["no head loaded"].append(per_decode(bare))
        head.follow(0, True)
        results["head followed"].append(per_decode(with_head))
        head.follow(0, False)
        results["head not followed"].append(per_decode(with_head))
    base = statistics.median(results["no head loaded"])
    for name, samples in results.items():
        t = statistics.median(samples)
        print(f"{name}: {t * 1e6:.0f} us a one-token decode ({t / base:.3f}x, {(t - base) * 1e6:+.0f} us)")


if __name__ == "__main__":
    main()
