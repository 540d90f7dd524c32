"""A/B of two code versions, each a bench --json run per round (auto and none in each run, prompt by prompt).
Run from this folder: python analyse.py (base = d49f692, block = dc31c69)."""
import json, math, statistics, sys, glob
from collections import defaultdict

def load(version, temp):
    runs = []
    for f in sorted(glob.glob(f"{version}-t{temp}-r*.json")):
        d = json.load(open(f))
        by = defaultdict(dict)
        for r in d["results"]:
            by[r["prompt_id"]][r["config"]] = r
        runs.append(by)
    return runs

def summary(version, temp):
    runs = load(version, temp)
    if not runs:
        return None
    prompts = list(runs[0])
    ratio, net, secs_auto, secs_none = {}, {}, 0.0, 0.0
    for p in prompts:
        rs = [run[p]["auto:k=auto"]["tokens_per_s"] / run[p]["none"]["tokens_per_s"] for run in runs if p in run]
        ratio[p] = math.exp(statistics.fmean(math.log(x) for x in rs))
        nets = [run[p]["auto:k=auto"]["drafting_net"] for run in runs if p in run and run[p]["auto:k=auto"]["drafting_net"] is not None]
        net[p] = statistics.fmean(nets) if nets else 0.0
        for run in runs:
            secs_auto += run[p]["auto:k=auto"]["tokens"] / run[p]["auto:k=auto"]["tokens_per_s"]
            secs_none += run[p]["none"]["tokens"] / run[p]["none"]["tokens_per_s"]
    g = math.exp(statistics.fmean(math.log(x) for x in ratio.values()))
    worst = min(ratio, key=ratio.get)
    return dict(runs=len(runs), geo=g, worst=(worst, ratio[worst]), below=sum(x < 0.97 for x in ratio.values()),
                net_median=statistics.median(net.values()), net_worst=min(net.values()), net_sum=sum(net.values()),
                secs_auto=secs_auto / len(runs), secs_none=secs_none / len(runs), ratio=ratio, net=net)

for temp in ("0", "0.7"):
    out = {v: summary(v, temp) for v in ("base", "block")}
    print(f"--temp {temp}")
    print("| version | rounds | plain s (a round) | auto s | auto vs plain (geomean) | worst prompt | below 0.97x | drafting net: median, worst, sum |")
    print("|---|---|---|---|---|---|---|---|")
    for v, s in out.items():
        if s:
            print(f"| {v} | {s['runs']} | {s['secs_none']:.1f} | {s['secs_auto']:.1f} | {s['geo']:.3f}x | {s['worst'][1]:.3f}x ({s['worst'][0]}) | {s['below']} | "
                  f"{s['net_median']*100:+.2f} %, {s['net_worst']*100:+.1f} %, {s['net_sum']*100:+.0f} % |")
    if out["base"] and out["block"]:
        moved = sorted(((out["block"]["ratio"][p] / out["base"]["ratio"][p], p) for p in out["base"]["ratio"]))
        print("prompts moved most (block/base of auto vs plain):", ", ".join(f"{p} {x:.3f}" for x, p in moved[:4] + moved[-4:]))

# The measurement floor: prompt runs where auto sent no draft at all (auto is then plain decoding plus
# asking), both versions: how far their auto/plain ratio strays from 1 is this machine's noise per prompt.
for temp in ("0", "0.7"):
    quiet = []
    for f in sorted(glob.glob(f"*-t{temp}-r*.json")):
        by = defaultdict(dict)
        for r in json.load(open(f))["results"]:
            by[r["prompt_id"]][r["config"]] = r
        quiet += [by[p]["auto:k=auto"]["tokens_per_s"] / by[p]["none"]["tokens_per_s"]
                  for p in by if not sum(by[p]["auto:k=auto"]["drafted_by"].values())]
    quiet.sort()
    print(f"--temp {temp}: {len(quiet)} prompt runs drafted nothing: auto/plain median {statistics.median(quiet):.3f}, "
          f"sd {statistics.pstdev(quiet):.3f}, least {quiet[0]:.3f}, 5th percentile {quiet[len(quiet) // 20]:.3f}, "
          f"below 0.97x: {sum(q < 0.97 for q in quiet)}")
