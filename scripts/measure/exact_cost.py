"""Plain decoding with and without --exact, interleaved on one machine: what exact mode costs.

Usage: python scripts/measure/exact_cost.py [bench/measured/NAME] (loads the default pair's target
twice, ~2 min on 2 cores); with NAME, also writes NAME.md and NAME.json.
"""
import json
import statistics
import sys
from pathlib import Path

from specllama.decoding.engine import GenerationConfig
from specllama.llama.machine import cpu_model
from specllama.runtime import LoadOptions, open_runtime

rts = {m: open_runtime(LoadOptions(exact=m == "exact", n_ctx=1024, load_draft=False)) for m in ("default", "exact")}
rates = {m: [] for m in rts}
for r in range(4):
    for m in (("default", "exact") if r % 2 == 0 else ("exact", "default")):
        rt = rts[m]
        rt.reset()
        s = rt.generate(rt.prompt_tokens("Write a Python function that merges two sorted lists."),
                        GenerationConfig(max_tokens=64, drafter="none")).drain()
        rates[m].append(s.tokens_per_s)
lines = [f"{cpu_model()}, {rts['default'].threads} threads, target {rts['default'].target_name}, plain decoding, "
         "64 tokens, 4 interleaved rounds", ""]
for m, v in rates.items():
    lines.append(f"- {m}: tok/s per round {[round(x, 2) for x in v]}, median {statistics.median(v):.2f}")
ratio = statistics.median(rates["exact"]) / statistics.median(rates["default"])
lines.append(f"- exact / default, medians: {ratio:.3f}x")
print("\n".join(lines))
if len(sys.argv) > 1:
    out = Path(sys.argv[1])
    command = "python " + " ".join(sys.argv)
    out.with_suffix(".md").write_text(f"# What --exact costs\n\nCommand: `{command}`\n\n" + "\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps({"command": command, "machine": cpu_model(),
                                                    "tokens_per_s": rates, "exact_over_default": ratio}, indent=1) + "\n")
