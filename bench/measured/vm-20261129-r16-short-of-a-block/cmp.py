# usage: cmp.py A B: two exact-cost replay outputs side by side, geomean and mean worst request
import math, sys
def load(f): return {l.split()[0]: (float(l.split()[4].rstrip('x')), float(l.split()[9].rstrip('x'))) for l in open(f)}
a, b = load(sys.argv[1]), load(sys.argv[2])
for k in a: print(f"{k:16s} {a[k][0]:.3f} ({a[k][1]:.2f})  {b[k][0]:.3f} ({b[k][1]:.2f})")
for n, d in (sys.argv[1], a), (sys.argv[2], b):
    print(f"{n}: geomean {math.exp(sum(math.log(x[0]) for x in d.values()) / len(d)):.4f}, worst mean {sum(x[1] for x in d.values()) / len(d):.3f}")
