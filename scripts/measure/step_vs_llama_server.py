#!/usr/bin/env python3
"""A whole speculative step, ours against llama.cpp's own server, at the same draft lengths.

Both servers get the same request: repeat a file given in the prompt, greedy. Each copies from the
prompt (our suffix drafter at a fixed -k; llama-server's ngram-mod drafter held to the same draft
length), so nearly every draft is accepted and each step verifies about the same number of rows on
both. What a step costs (generation time / steps) is then compared at equal rows, beside each
server's own plain decoding of the same request: the difference is what our step adds around
llama_decode (batch building, row reads, verification, Python) against llama.cpp's C++ loop.

Every server is fresh (ours with empty cost and prompt caches), same target file, threads and
context; arms interleaved, the order turning every round; medians.

    flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/step_vs_llama_server.py \
        --llama-server PATH --k 8,15 --rounds 2 --out bench/measured/vm-20261125-step-vs-llama-server
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts" / "measure"))

from bench_serve import Server, free_port, llama_server_version  # noqa: E402
from report_files import write_report  # noqa: E402

from specllama.llama.machine import cpu_model  # noqa: E402
from specllama.models import store  # noqa: E402
from specllama.models.registry import load_registry  # noqa: E402

# Not one of the replay's files: a small module, held out from every tuning run.
FILE = '''import json
from pathlib import Path


class Settings:
    """Settings read from a JSON file, with defaults for what the file leaves out."""

    defaults = {"theme": "dark", "font_size": 12, "autosave": True, "recent": []}

    def __init__(self, path):
        self.path = Path(path)
        self.values = dict(self.defaults)
        if self.path.exists():
            self.values.update(json.loads(self.path.read_text()))

    def get(self, key):
        return self.values.get(key, self.defaults.get(key))

    def set(self, key, value):
        if key not in self.defaults:
            raise KeyError(f"unknown setting: {key}")
        self.values[key] = value

    def add_recent(self, name, limit=10):
        recent = [n for n in self.values["recent"] if n != name]
        self.values["recent"] = [name] + recent[: limit - 1]

    def save(self):
        self.path.write_text(json.dumps(self.values, indent=2, sort_keys=True))
'''
ASK = f"settings.py:\n```python\n{FILE}```\n\nRepeat this file exactly, in one Python code block, and nothing else."


def post(server: Server, body: dict) -> dict:
    req = urllib.request.Request(server.url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=1200) as r:
        return json.loads(r.read())


def start(arm: str, k: int, args, target: Path, log: Path) -> Server:
    port = free_port()
    if arm.startswith("llama-server"):
        # ngram-mod (what --spec-default uses) held to k drafts; ngram-simple at size-m 8 drafted nothing here.
        spec = [] if k == 0 else ["--spec-type", "ngram-mod", "--spec-ngram-mod-n-min", str(k),
                                  "--spec-ngram-mod-n-max", str(k), "--spec-draft-n-max", str(k)]
        cmd = [args.llama_server, "-m", str(target), "-t", str(args.threads), "-c", str(args.ctx),
               "--host", "127.0.0.1", "--port", str(port), "-np", "1", *spec]
        return Server(arm, cmd, port, log)
    scratch = Path(tempfile.mkdtemp(prefix="step-vs-"))
    cmd = [sys.executable, "-m", "specllama", "serve", "--port", str(port), "--threads", str(args.threads),
           "--ctx", str(args.ctx), "--parallel", "1"]
    env = {"SPECLLAMA_COSTS": str(scratch / "costs"), "SPECLLAMA_PROMPT_CACHE": str(scratch / "prompt-cache")}
    return Server(arm, cmd, port, log, env=env, scratch=scratch)


def run_arm(arm: str, k: int, args, target: Path, log: Path) -> dict:
    server = start(arm, k, args, target, log)
    try:
        body = {"model": server.model, "messages": [{"role": "user", "content": ASK}],
                "max_tokens": args.max_tokens, "temperature": 0}
        if arm == "specllama":
            body.update({"drafter": "suffix", "k": k} if k else {"drafter": "none"})
        reply = post(server, body)
    finally:
        server.stop()
    t = reply.get("timings") or {}
    n, ms = t.get("predicted_n", 0), t.get("predicted_ms", 0.0)
    drafted, accepted = t.get("draft_n", 0), t.get("draft_n_accepted", 0)
    # Each step keeps its accepted drafts and the target's own token; the first token comes from
    # the prompt's decode, which predicted_ms does not count on either server.
    steps = max(1, n - 1 - accepted)
    return {"arm": arm, "k": k, "tokens": n, "ms": ms, "drafted": drafted, "accepted": accepted, "steps": steps,
            "ms_per_step": ms / steps, "rows_per_step": 1 + drafted / steps,
            "tokens_per_s": n / ms * 1000 if ms else 0.0, "text": reply["choices"][0]["message"]["content"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-server", required=True, help="llama.cpp's llama-server from the same vendored sources")
    ap.add_argument("--k", default="8,15", help="draft lengths to compare (default 8,15)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=300)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--out", help="write OUT.md and OUT.json")
    args = ap.parse_args(argv)

    registry = load_registry()
    target = store.ensure(registry.model(registry.pair(None).target))
    log = Path(tempfile.mkdtemp(prefix="step-vs-logs-")) / "servers.log"
    arms = [(arm, k) for k in [0] + [int(x) for x in args.k.split(",")] for arm in ("specllama", "llama-server")]
    results: list[dict] = []
    for r in range(args.rounds):
        for arm, k in (arms if r % 2 == 0 else arms[::-1]):
            res = run_arm(arm, k, args, target, log)
            res["round"] = r
            results.append(res)
            print(f"round {r} {arm:12s} k={k:2d}: {res['tokens']} tokens in {res['ms'] / 1000:.2f} s, "
                  f"{res['steps']} steps of {res['rows_per_step']:.2f} rows, {res['ms_per_step']:.1f} ms a step, "
                  f"drafts {res['accepted']}/{res['drafted']}", flush=True)

    def med(arm: str, k: int, key: str) -> float:
        return statistics.median(x[key] for x in results if x["arm"] == arm and x["k"] == k)

    head = (f"Machine: {cpu_model()}, {os.cpu_count()} CPUs; threads {args.threads}; thread wait "
            f"{os.environ.get('SPECLLAMA_THREAD_WAIT', 'auto')}; target {target.name}; greedy, {args.max_tokens} "
            f"tokens at most; {args.rounds} interleaved rounds, medians.\nllama-server: {args.llama_server} "
            f"({llama_server_version(args.llama_server)}), -np 1, ngram-mod drafts of k "
            f"(--spec-ngram-mod-n-min/n-max k, --spec-draft-n-max k); specllama serve --parallel 1, drafter suffix -k k.")
    lines = ["| k | server | tokens/s | ms a step | rows a step | step / own plain step | drafts accepted |",
             "|---|---|---|---|---|---|---|"]
    for k in [0] + [int(x) for x in args.k.split(",")]:
        for arm in ("specllama", "llama-server"):
            plain = med(arm, 0, "ms_per_step")
            lines.append(f"| {k} | {arm} | {med(arm, k, 'tokens_per_s'):.1f} | {med(arm, k, 'ms_per_step'):.1f} | "
                         f"{med(arm, k, 'rows_per_step'):.2f} | {med(arm, k, 'ms_per_step') / plain:.2f} | "
                         f"{med(arm, k, 'accepted'):.0f}/{med(arm, k, 'drafted'):.0f} |")
    same = {k: len({x["text"] for x in results if x["k"] == k and x["arm"] == "specllama"}) == 1
            for k in [0] + [int(x) for x in args.k.split(",")]}
    print(head)
    print("\n".join(lines))
    if args.out:
        write_report(args.out, "A speculative step, ours against llama-server's", "step_vs_llama_server.py", argv,
                     head, lines, {"runs": results}, f"our texts identical across rounds, per k: {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
