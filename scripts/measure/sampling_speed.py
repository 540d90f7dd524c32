"""How long `probabilities()` takes on a Qwen-sized vocabulary (9 rows: [last] + 8 drafts), with
LLM-like and worst-case flat logits. A measurement, not a test: the machine is shared.

    .venv/bin/python scripts/measure/sampling_speed.py
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from specllama.decoding.sampling import SamplingParams, probabilities

QWEN_VOCAB = 151_936


def logits(kind: str, rows: int = 9, seed: int = 10) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = rng.normal(0, 1, (rows, QWEN_VOCAB)).astype(np.float32)
    if kind == "llm-like":  # a few dozen plausible tokens far above a long flat tail
        for r in range(rows):
            out[r, rng.choice(QWEN_VOCAB, 40, replace=False)] += rng.uniform(6, 12, 40)
    return out


def main() -> None:
    params = SamplingParams(temperature=0.8, top_p=0.95)
    for kind in ("llm-like", "flat N(0,1), worst case"):
        x = logits(kind)
        probabilities(x, params)  # warm-up
        times = []
        for _ in range(15):
            start = time.perf_counter()
            probabilities(x, params)
            times.append((time.perf_counter() - start) * 1e3)
        print(f"probabilities() on (9, {QWEN_VOCAB}) float32, temp 0.8 top_p 0.95, {kind}: "
              f"median {statistics.median(times):.2f} ms (min {min(times):.2f}, max {max(times):.2f}, 15 runs)")


if __name__ == "__main__":
    main()
