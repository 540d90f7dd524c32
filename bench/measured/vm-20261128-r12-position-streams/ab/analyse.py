"""Per arm: geomean auto vs plain, worst prompt, drafting nets, same-text counts, and the per-prompt
spread of auto/plain across the runs' repeats (how noisy a prompt's ratio is)."""
import glob, json, math, statistics, sys
from collections import defaultdict
folder = sys.argv[1] if len(sys.argv) > 1 else "."
arms = defaultdict(list)
for path in sorted(glob.glob(f"{folder}/*-r*.json")):
    arms[path.split("/")[-1].split("-r")[0]].append(json.load(open(path)))
for arm, docs in arms.items():
    per_prompt, nets, geos, worsts, same, parted, tokdiff = defaultdict(list), [], [], [], 0, 0, []
    spreads = []
    for d in docs:
        res = {(r["config"], r["prompt_id"]): r for r in d["results"]}
        s = [x for x in d["summary"] if x["config"] == "auto:k=auto"][0]
        geos.append(s["geomean_speedup"]); worsts.append(s["min_speedup"])
        nets.append((s["median_drafting_net"], s["min_drafting_net"]))
        if s["identical"]:
            same += s["identical"]["identical"]; parted += s["identical"].get("parted", 0)
        for (c, p), r in res.items():
            if c != "auto:k=auto":
                continue
            base = res[("none", p)]
            per_prompt[p].append(r["speedup"])
            tokdiff.append(r["tokens"] != base["tokens"])
            ratios = [a / b for a, b in zip(r["runs_tokens_per_s"], base["runs_tokens_per_s"])]
            if len(ratios) > 1:
                spreads.append(statistics.pstdev(ratios))
    g = math.exp(statistics.mean(math.log(x) for x in geos))
    print(f"{arm}: {len(docs)} runs; auto vs plain per run {', '.join(f'{x:.3f}' for x in geos)} (geomean {g:.3f}); "
          f"worst prompt per run {', '.join(f'{x:.3f}' for x in worsts)}; drafting net median/worst per run "
          f"{', '.join(f'{a:+.1%}/{b:+.1%}' for a, b in nets)}")
    print(f"  same text as none: {same} runs, parted {parted}; prompts whose auto and none token counts differ: "
          f"{sum(tokdiff)} of {len(tokdiff)}; per-prompt sd of auto/none over a run's repeats: median "
          f"{statistics.median(spreads):.3f}, mean {statistics.mean(spreads):.3f}")
    print("  per prompt (geomean over runs): " + ", ".join(
        f"{p} {math.exp(statistics.mean(math.log(x) for x in v)):.3f}" for p, v in per_prompt.items()))
