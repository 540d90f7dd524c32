# Noisy replays side by side: per set, auto vs none for each seed (worst request), and the mean over seeds.
import sys
def load(f):
    out = {}
    for line in open(f):
        p = line.split()
        out[p[0]] = (float(p[4].rstrip("x")), float(p[9].rstrip("x")))
    return out
variants = sys.argv[1:]
seeds = (1, 2, 3)
runs = {v: [load(f"n-{v}-{s}.txt") for s in seeds] for v in variants}
print("| set | " + " | ".join(f"{v}: seeds 1 / 2 / 3 (worst request) | {v}: mean" for v in variants) + " |")
print("|---|" + "---|---|" * len(variants))
for k in runs[variants[0]][0]:
    cells = []
    for v in variants:
        r = runs[v]
        cells.append(" / ".join(f"{x[k][0]:.3f} ({x[k][1]:.2f})" for x in r))
        cells.append(f"{sum(x[k][0] for x in r) / 3:.3f}")
    print(f"| {k} | " + " | ".join(cells) + " |")
