"""Per drafting step, the mean microseconds of the draft, choosing its tokens and judging, from the tables
scripts/measure/draft_split.py prints (mean over all steps and over the steps that sent nothing: the
bench's `none` runs and the steps that drafted nothing).   python drafting_means.py split-*.log"""
import re
import sys

for name in sys.argv[1:]:
    text = open(name).read()
    total, quiet = map(int, re.search(r"(\d+) steps, (\d+) sent nothing", text).groups())
    drafting, parts = total - quiet, []
    for label in ("draft (ModelDrafter.propose", "  choosing the tokens", "judge (engine._judge)"):
        line = next(line for line in text.splitlines() if line.startswith(label))
        quiet_mean, all_mean = (float(m.split("/")[1]) for m in re.findall(r"[\d.]+ / +[\d.]+", line))
        parts.append(f"{label.strip().split(' (')[0]} {(all_mean * total - quiet_mean * quiet) / drafting:.0f} us")
    print(f"{name}: {drafting} drafting steps; " + ", ".join(parts))
