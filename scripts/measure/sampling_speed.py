"""How long `probabilities()` takes on a Qwen-sized vocabulary (9 rows: [last] + 8 drafts), with
LLM-like and worst-case flat logits; then what one plain sampling step costs in Python (one row's
probabilities and the draw from it, `sample()`), per sampler setting. A measurement, not a test:
the machine is shared. Compare two commits by running it with PYTHONPATH set to each checkout.

    .venv/bin/python scripts/measure/sampling_speed.py
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from specllama.decoding.sampling import SamplingParams, probabilities, sample
from specllama.decoding.target_rows import LazyProbabilities

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
    plain_step()


def plain_step() -> None:
    """A plain step at temperature > 0: one token drawn from one row, as the engine does it
    (target_rows.LazyProbabilities: at a temperature alone, the row's hot tokens only), beside the whole
    row's probabilities() and sample(). Why: on the lent H200 a greedy step is 1.9 ms, and at --temp 0.7
    Python took 23 % of plain decoding's time (bench/measured/lent-20261127-r2-gpu-heldout-t0.7). Warm
    caches here: a real run's figures are several times these (scripts/measure/judge_split.py). And
    these "llm-like" rows are not peaked at 0.7 (their N(0,1) tail lies within 14 logits of the top), so
    the engine's draw goes the whole-row way here; a real model's rows mostly are
    (scripts/measure/peaked_rows.py)."""
    x = logits("llm-like", rows=1)
    rng = np.random.default_rng(3)
    for params in (SamplingParams(temperature=0.7), SamplingParams(temperature=0.7, top_p=0.95),
                   SamplingParams(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05)):
        probs_ms, draw_ms, engine_ms = [], [], []
        for _ in range(25):
            start = time.perf_counter()
            row = probabilities(x, params)[0]
            middle = time.perf_counter()
            sample(row, rng)
            end = time.perf_counter()
            LazyProbabilities(x, params).draw(0, rng)
            probs_ms.append((middle - start) * 1e3)
            draw_ms.append((end - middle) * 1e3)
            engine_ms.append((time.perf_counter() - end) * 1e3)
        print(f"plain step, temp {params.temperature} top_k {params.top_k} top_p {params.top_p} min_p {params.min_p}: "
              f"probabilities {statistics.median(probs_ms):.3f} ms, sample {statistics.median(draw_ms):.3f} ms; "
              f"the engine's draw {statistics.median(engine_ms):.3f} ms (medians of 25)")


if __name__ == "__main__":
    main()
