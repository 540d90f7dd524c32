# Each prompt of a bench --json run: tok/s ratio, shared-text ratio, drafting net, verdict, runs (README.md).
import json, sys
d=json.load(open(sys.argv[1]))
base={r['prompt_id']:r for r in d['results'] if r['config']=='none'}
for r in d['results']:
    if r['config']=='none': continue
    b=base[r['prompt_id']]
    sh = r['shared_speedup']
    print(f"{r['prompt_id']:20s} tps {r['speedup']:.3f} shared {sh and round(sh,3)} ({r['shared_tokens']} tok) net {r['drafting_net'] and round(r['drafting_net'],3)} {r['identical']:9s} drafted/kept {sum(r['drafted_by'].values())}/{sum(r['accepted_by'].values())} none {[round(x,2) for x in b['runs_tokens_per_s']]} auto {[round(x,2) for x in r['runs_tokens_per_s']]}")
