"""Plain decoding with and without --exact, interleaved on one machine: what exact mode costs.

Usage: python scripts/measure_exact_cost.py (loads the default pair's target twice, ~2 min on 2 cores).
"""
import statistics

from specllama.decoding.engine import GenerationConfig
from specllama.runtime import LoadOptions, Runtime

rts = {m: Runtime(LoadOptions(exact=m == "exact", n_ctx=1024, load_draft=False)) for m in ("default", "exact")}
rates = {m: [] for m in rts}
for r in range(4):
    for m in (("default", "exact") if r % 2 == 0 else ("exact", "default")):
        rt = rts[m]
        rt.reset()
        s = rt.generate(rt.prompt_tokens("Write a Python function that merges two sorted lists."),
                        GenerationConfig(max_tokens=64, drafter="none")).drain()
        rates[m].append(s.tokens_per_s)
for m, v in rates.items():
    print(m, "plain decoding tok/s per round:", [round(x, 2) for x in v], "median", round(statistics.median(v), 2))
print("exact/default median ratio:", round(statistics.median(rates["exact"]) / statistics.median(rates["default"]), 3))
