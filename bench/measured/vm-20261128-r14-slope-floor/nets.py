# Drafting's own net per prompt of bench --json runs, side by side, with each run's mean and worst (README.md).
import json
import sys

runs = {path.rsplit("/", 1)[-1].removesuffix(".json"): json.load(open(path)) for path in sys.argv[1:]}
nets = {name: {r["prompt_id"]: r["drafting_net"] for r in d["results"] if r["config"] != "none"} for name, d in runs.items()}
prompts = list(next(iter(nets.values())))
print(f"{'prompt':20s}" + "".join(f"{name:>14s}" for name in nets))
for p in prompts:
    print(f"{p:20s}" + "".join(f"{100 * nets[n][p]:+13.1f}%" if nets[n][p] is not None else f"{'-':>14s}" for n in nets))
print(f"{'mean':20s}" + "".join(f"{100 * sum(v for v in nets[n].values() if v is not None) / len(prompts):+13.1f}%" for n in nets))
print(f"{'worst':20s}" + "".join(f"{100 * min(v for v in nets[n].values() if v is not None):+13.1f}%" for n in nets))
