"""The catch-up A/B's table: per arm and round, model:k=4's tok/s, its ratio to the same run's plain, the draft's
seconds a drafted token, c, and auto's ratio; the trial's choice. The arms and rounds are the folder's
ARM-rN.json files (base first).   python summarize.py [FOLDER (default: here)]"""
import json
import sys
import statistics as st
from pathlib import Path

HERE = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
print("| arm | round | none tok/s | model:k=4 tok/s | model vs none | draft s / drafted token | c | auto vs none | catch-up |")
print("|---|---|---|---|---|---|---|---|---|")
per_arm = {}
names = sorted(HERE.glob("*-r*.json"))
arms = sorted({f.name.rsplit("-r", 1)[0] for f in names}, key=lambda a: (a != "base", a))
rounds = sorted({int(f.stem.rsplit("-r", 1)[1]) for f in names})
for arm in arms:
    for r in rounds:
        d = json.loads((HERE / f"{arm}-r{r}.json").read_text())
        s = {x["config"]: x for x in d["summary"]}
        none, model, auto = s["none"], s["model:k=4"], s["auto:k=auto"]
        drafted = sum(model["drafted_by"].values())
        per_token = model["time_split"]["draft"]["seconds"] / drafted
        c = d["cost_curve"].get("draft_ratio")
        ratio = model["tokens_per_s"] / none["tokens_per_s"]
        per_arm.setdefault(arm, []).append((ratio, per_token, model["tokens_per_s"], auto["geomean_speedup"]))
        print(f"| {arm} | {r} | {none['tokens_per_s']:.2f} | {model['tokens_per_s']:.2f} | {ratio:.3f} | "
              f"{per_token * 1e3:.2f} ms | {c:.3f} | {auto['geomean_speedup']:.3f} | {d['machine'].get('draft_catch_up') or 'merged (before the trial)'} |")
print()
for arm, rows in per_arm.items():
    print(f"{arm}: median model vs none {st.median(r[0] for r in rows):.3f}, draft {st.median(r[1] for r in rows) * 1e3:.2f} ms "
          f"a drafted token, model {st.median(r[2] for r in rows):.2f} tok/s, auto vs none {st.median(r[3] for r in rows):.3f}")
