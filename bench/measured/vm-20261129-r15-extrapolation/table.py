# Noisy replays side by side: per set, the mean over seeds 1-3 of auto vs none (the worst request over seeds),
# then each variant's geometric mean over every set and seed. usage: table.py base variant...
import math, sys
def load(f):
    out = {}
    try:
        for line in open(f):
            p = line.split()
            out[p[0]] = (float(p[4].rstrip("x")), float(p[9].rstrip("x")))
    except FileNotFoundError:
        pass
    return out
vs = sys.argv[1:]
data = {v: [{**load(f"n-{v}-{s}.txt"), **load(f"m-{v}-{s}.txt")} for s in (1, 2, 3)] for v in vs}
sets = list(data[vs[0]][0])
print("| set | " + " | ".join(f"{v}: mean (worst)" for v in vs) + " |")
print("|---|" + "---|" * len(vs))
for k in sets:
    cells = []
    for v in vs:
        xs = [d[k] for d in data[v] if k in d]
        cells.append(f"{sum(x[0] for x in xs) / len(xs):.3f} ({min(x[1] for x in xs):.2f}) n{len(xs)}" if xs else "")
    print(f"| {k} | " + " | ".join(cells) + " |")
common = [(k, s) for k in sets for s in range(3) if all(k in data[v][s] for v in vs)]
for v in vs:
    xs = [data[v][s][k] for k, s in common]
    print(f"{v}: geomean {math.exp(sum(math.log(x[0]) for x in xs) / len(xs)):.4f} over {len(xs)} set-seeds; "
          f"worst request mean {sum(x[1] for x in xs) / len(xs):.3f}; worst < 0.97 in {sum(x[1] < 0.97 for x in xs)}")
