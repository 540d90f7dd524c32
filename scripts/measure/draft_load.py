"""What loading the draft model costs: the default pair loaded with and without its draft, each load
in a fresh process (so resident memory is the load's own), interleaved rounds, files in the page
cache (a first untimed load of each reads them from disk). runtime/draft_load.py's margin is priced
on this.

Usage: python scripts/measure/draft_load.py [--rounds 5] [--ctx 4096] [--out bench/measured/NAME]
Writes NAME.json and NAME.md when --out is given.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

ONE_LOAD = """
import json, sys, time
from specllama.llama.machine import current_rss_bytes
from specllama.runtime.loaded import open_runtime
from specllama.runtime.options import LoadOptions
before = current_rss_bytes()
start = time.perf_counter()
rt = open_runtime(LoadOptions(load_draft=sys.argv[1] == "draft", n_ctx=int(sys.argv[2])))
seconds = time.perf_counter() - start
after = current_rss_bytes()
info = rt.describe()
print(json.dumps({"seconds": seconds, "rss_mb": (after - before) / 2**20, "threads": info.threads,
                  "target": info.target.file, "draft": info.draft.file if info.draft else None}))
rt.close()
"""


def load_once(which: str, n_ctx: int) -> dict:
    done = subprocess.run([sys.executable, "-c", ONE_LOAD, which, str(n_ctx)], cwd=REPO, capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--out", help="bench/measured/NAME: writes NAME.json and NAME.md")
    args = parser.parse_args()
    from specllama.llama.machine import cpu_model

    for which in ("target", "draft"):
        load_once(which, args.ctx)  # into the page cache: untimed
    runs: dict[str, list[dict]] = {"target": [], "draft": []}
    for r in range(args.rounds):
        for which in (("target", "draft") if r % 2 == 0 else ("draft", "target")):
            runs[which].append(load_once(which, args.ctx))
    med = {w: {k: statistics.median(run[k] for run in runs[w]) for k in ("seconds", "rss_mb")} for w in runs}
    extra_s = med["draft"]["seconds"] - med["target"]["seconds"]
    extra_mb = med["draft"]["rss_mb"] - med["target"]["rss_mb"]
    first = runs["draft"][0]
    doc = {"command": "python scripts/measure/draft_load.py " + " ".join(sys.argv[1:]), "cpu": cpu_model(),
           "threads": first["threads"], "target": first["target"], "draft": first["draft"], "n_ctx": args.ctx,
           "rounds": args.rounds, "runs": runs, "median": med, "draft_load_s": extra_s, "draft_rss_mb": extra_mb}
    lines = [f"# Loading the draft model: what it costs ({doc['cpu']}, {doc['threads']} threads)", "",
             f"`{doc['command']}`: the default pair ({doc['target']} with {doc['draft']}), context {args.ctx}, "
             f"{args.rounds} interleaved rounds, each load in a fresh process, files in the page cache.", "",
             "| load | median seconds | median resident MB added |", "|---|---|---|",
             f"| target alone | {med['target']['seconds']:.2f} | {med['target']['rss_mb']:.0f} |",
             f"| target + draft | {med['draft']['seconds']:.2f} | {med['draft']['rss_mb']:.0f} |",
             f"| the draft's share | {extra_s:.2f} | {extra_mb:.0f} |", "",
             "Per round (seconds): target " + ", ".join(f"{r['seconds']:.2f}" for r in runs["target"])
             + "; target + draft " + ", ".join(f"{r['seconds']:.2f}" for r in runs["draft"]) + "."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out + ".json").write_text(json.dumps(doc, indent=1) + "\n")
        Path(args.out + ".md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
