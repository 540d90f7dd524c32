"""What specllama adds to a plain decoding step, and what verification reads per step (issue 29 item 5).

Part 1 (the real target, CPU): plain greedy decoding through the engine (`--drafter none`) against a
bare llama-cpp-python loop over the same context type (llama_decode of one token, the logits row's
argmax), interleaved rounds, medians. Same prompt, same tokens, same threads.

Part 2 (no model; a Qwen-sized vocabulary of 151,936 logits a row): per verified row, greedy
verification's read before (copy the row out of llama.cpp's buffer, a max for the finite check,
then argmax) and now (one argmax over the buffer, the finite check on its value); per sampling step
with a draft of 8 rejected at its first token, the probabilities of all 9 rows before and of the one
row read now (LazyProbabilities).

    flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/step_overhead.py --out bench/measured/NAME
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from specllama.decoding.events import StepEvent
from specllama.decoding.request import GenerationConfig
from specllama.decoding.sampling import SamplingParams, probabilities
from specllama.decoding.target_rows import LazyProbabilities
from specllama.decoding.verify import verify_sampling
from specllama.llama.backend import C
from specllama.llama.context import DecodeContext
from specllama.llama.machine import cpu_model
from specllama.runtime.loaded import Runtime, open_runtime
from specllama.runtime.options import LoadOptions

QWEN_VOCAB = 151_936
PROMPT = "Write a Python function that parses an ISO 8601 date string and returns a datetime. Explain each step."


def bare_loop(ctx: DecodeContext, prompt: list[int], n: int) -> tuple[list[int], float]:
    """llama-cpp-python alone: the prompt, then one llama_decode per token and the argmax of its row."""
    ctx.clear()
    ctx.decode(prompt, logits="none")  # the same prefill as the engine's (not timed by either side)
    raw, vocab = ctx._ctx, ctx.model.n_vocab
    last, out = prompt[-1], []
    ctx.rollback(len(prompt) - 1)
    pos = len(prompt) - 1
    started = time.perf_counter()
    for _ in range(n):
        token = (C.llama_token * 1)(last)
        batch = C.llama_batch_get_one(token, 1)
        if C.llama_decode(raw, batch) != 0:
            raise RuntimeError("llama_decode failed")
        row = np.ctypeslib.as_array(C.llama_get_logits_ith(raw, -1), shape=(vocab,))
        last = int(np.argmax(row))
        out.append(last)
        pos += 1
    seconds = time.perf_counter() - started
    C.llama_memory_seq_rm(C.llama_get_memory(raw), 0, 0, -1)
    ctx.held[0].clear()
    return out, seconds


def engine_loop(runtime: Runtime, prompt: list[int], n: int) -> tuple[list[int], float, float]:
    runtime.reset()
    config = GenerationConfig(max_tokens=n, drafter="none", k=0, stop=())
    out, python, started, first = [], 0.0, None, None
    for event in runtime.generate(prompt, config):
        if isinstance(event, StepEvent):
            python += event.t_python
            if first is None:  # the prefill is the first step's: time from the end of step 1
                first = time.perf_counter()
        elif hasattr(event, "id"):
            out.append(event.id)
    started = first or time.perf_counter()
    return out, time.perf_counter() - started, python


def part1(rounds: int, n: int, threads: int) -> dict:
    with open_runtime(LoadOptions(load_draft=False, n_ctx=2048, threads=threads)) as runtime:
        prompt = runtime.prompt_tokens(PROMPT)
        ctx = runtime.target_ctx  # a script may reach inside: the same context the engine decodes in
        runs = []
        for r in range(rounds):
            for side in (("engine", "bare") if r % 2 == 0 else ("bare", "engine")):
                if side == "bare":
                    tokens, seconds = bare_loop(ctx, prompt, n)
                    runs.append({"side": "bare", "round": r, "tokens": len(tokens), "seconds": seconds, "ids": tokens})
                else:
                    tokens, seconds, python = engine_loop(runtime, prompt, n)
                    # The engine's first token comes with the prefill: n - 1 timed steps.
                    runs.append({"side": "engine", "round": r, "tokens": len(tokens) - 1, "seconds": seconds,
                                 "python_s": python, "ids": tokens})
                print(f"  round {r} {side:6s} {runs[-1]['tokens'] / runs[-1]['seconds']:.2f} tok/s", flush=True)
        rate = {s: statistics.median(x["tokens"] / x["seconds"] for x in runs if x["side"] == s) for s in ("engine", "bare")}
        same = all(x["ids"][:n - 1] == runs[0]["ids"][:n - 1] for x in runs if x["side"] == "engine")
        info = runtime.describe()
        return {"target": info.target.file, "threads": info.threads, "tokens": n, "rounds": rounds, "runs": runs,
                "engine_tok_s": rate["engine"], "bare_tok_s": rate["bare"], "ratio": rate["engine"] / rate["bare"],
                "engine_texts_identical": same}


def timed(fn, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def part2(repeats: int) -> dict:
    rng = np.random.default_rng(1)
    buffer = (rng.standard_normal(QWEN_VOCAB) * 3).astype(np.float32)
    buffer[4242] += 20

    def row_before():
        row = buffer.copy()
        assert math.isfinite(float(row.max()))
        return int(np.argmax(row))

    def row_now():
        best = int(np.argmax(buffer))
        assert math.isfinite(float(buffer[best]))
        return best

    block = np.stack([buffer] * 9)
    params = SamplingParams(temperature=0.7, top_p=0.95)
    draft = [int(np.argmin(buffer))] + [1] * 7  # the target gives its first token no chance: rejected at once

    def sampling_before():
        verify_sampling(draft, None, probabilities(block, params), np.random.default_rng(0))

    def sampling_now():
        verify_sampling(draft, None, LazyProbabilities(block, params), np.random.default_rng(0))

    return {"greedy_row_before_us": timed(row_before, repeats) * 1e6, "greedy_row_now_us": timed(row_now, repeats) * 1e6,
            "sampling_rejected_k8_before_ms": timed(sampling_before, repeats // 10) * 1e3,
            "sampling_rejected_k8_now_ms": timed(sampling_now, repeats // 10) * 1e3}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("-n", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=500)
    p.add_argument("--out", help="write OUT.md and OUT.json")
    args = p.parse_args()
    print("part 2: what verification reads", flush=True)
    reads = part2(args.repeats)
    print(json.dumps(reads, indent=1))
    print("part 1: engine vs bare loop", flush=True)
    loop = part1(args.rounds, args.n, args.threads)
    machine = f"{cpu_model()}, {platform.system()}, threads {loop['threads']}"
    md = "\n".join([
        f"# Step overhead ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
        f"Machine: {machine}; target {loop['target']} on CPU; greedy; {loop['tokens']} tokens, {loop['rounds']} "
        "interleaved rounds, medians.", "",
        "## Plain decoding: the engine (`--drafter none`) against a bare llama-cpp-python loop", "",
        f"engine {loop['engine_tok_s']:.2f} tok/s, bare loop {loop['bare_tok_s']:.2f} tok/s: "
        f"**{loop['ratio']:.3f}x** (goal: within 2 %); engine texts identical across rounds: {loop['engine_texts_identical']}", "",
        "## What verification reads (151,936 logits a row; no model)", "",
        "| | before | now |", "|---|---|---|",
        f"| greedy, per verified row | {reads['greedy_row_before_us']:.1f} us (copy, max, argmax) | "
        f"{reads['greedy_row_now_us']:.1f} us (argmax on llama.cpp's buffer) |",
        f"| sampling, draft of 8 rejected at token 1 | {reads['sampling_rejected_k8_before_ms']:.2f} ms (9 rows) | "
        f"{reads['sampling_rejected_k8_now_ms']:.2f} ms (the row read) |", ""])
    print(md)
    if args.out:
        for run in loop["runs"]:
            run.pop("ids")
        Path(args.out + ".md").write_text(md)
        Path(args.out + ".json").write_text(json.dumps({"machine": machine, "part1": loop, "part2": reads}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
