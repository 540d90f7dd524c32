# One line per real run (abba.sh's .txt files): plain and auto tok/s, auto's speedup (geomean over prompts) and
# worst prompt by tok/s, the same over the text shared with plain, and drafting's own net (worst, median).
# usage: summary.py RUN.txt...
import re, sys
for f in sys.argv[1:]:
    t = open(f).read()
    none = re.search(r"^none +([\d.]+)", t, re.M)
    auto = re.search(r"^auto:k=auto +([\d.]+) +([\d.]+)x +([\d.]+)x", t, re.M)
    shared = re.search(r"over the text shared with plain decoding, auto:k=auto: ([\d.]+)x, worst prompt ([\d.]+)x \(([^)]*)\)", t)
    net = re.search(r"worst prompt ([-+\d.]+%) \(([^)]*)\), median prompt ([-+\d.]+%)", t)
    print(f"{f}: plain {none[1]} tok/s, auto {auto[1]}: {auto[2]}x, worst {auto[3]}x; shared text {shared[1]}x, "
          f"worst {shared[2]}x ({shared[3]}); drafting's net worst {net[1]} ({net[2]}), median {net[3]}")
