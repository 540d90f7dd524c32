# From policy_replay --trace lines (traces.sh): each drafting step's cost (its ms / the plain step's ms) against the
# price its length was cut at. A step's net = tokens kept (accepted + 1) - its cost, in plain steps; printed: the
# plain steps the losing steps lost (and of those, the steps that cost over 1.3x their price: a batch size the
# engine had not yet learnt), the winning steps' gain, and drafting's net. usage: mispriced.py TRACE...
import re, sys
L = re.compile(r"step +\d+ \S+ sent +(\d+) accepted +(\d+) odds \[[^\]]*\] +([\d.]+) ms, plain step +([\d.]+) ms, T\(\d+\)/T\(1\) [\d.]+, priced ([\d.]+)")
tot = {"lost": 0.0, "lost_mispriced": 0.0, "won": 0.0, "steps": 0, "mispriced": 0}
for f in sys.argv[1:]:
    for line in open(f):
        m = L.match(line)
        if not m:
            continue
        sent, acc, ms, t1, priced = int(m[1]), int(m[2]), float(m[3]), float(m[4]), float(m[5])
        actual = ms / t1
        net = (acc + 1) - actual
        tot["steps"] += 1
        bad = actual > 1.3 * priced
        tot["mispriced"] += bad
        if net < 0:
            tot["lost"] += -net
            if bad:
                tot["lost_mispriced"] += -net
        else:
            tot["won"] += net
print(f"{tot['steps']} drafting steps, {tot['mispriced']} cost over 1.3x their price; lost {tot['lost']:.0f} plain steps "
      f"({tot['lost_mispriced']:.0f} on those), won {tot['won']:.0f}, net {tot['won'] - tot['lost']:.0f}")
