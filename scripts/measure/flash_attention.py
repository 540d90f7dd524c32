#!/usr/bin/env python3
"""Decoding at depth with and without llama.cpp's flash attention, beside llama-server's default.

An agent's request is long (a file, a conversation): every token is decoded, and every draft
verified, against thousands of cached tokens. Each server gets a ~3,400-token source file twice:
"summarise it" (plain decoding: ours with --drafter none, llama-server plain) and "return it whole
with one change" (speculation: ours auto, llama-server --spec-default), the second reusing the
first's cached prefix on both. Servers: specllama serve --flash-attn off (what auto means on a CPU)
and --flash-attn on (llama.cpp's own auto there), llama-server plain and --spec-default, each
fresh (ours with empty cost and prompt caches), same file, threads and context; the order turns
every round.

    flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/flash_attention.py \
        --llama-server PATH --rounds 1 --out bench/measured/vm-20261125-flash-attention-serve
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
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

SOURCE = REPO / "specllama" / "decoding" / "engine.py"
ARMS = ("specllama fa off", "specllama fa on", "llama-server", "llama-server-spec")


def post(server: Server, body: dict) -> tuple[float, dict]:
    req = urllib.request.Request(server.url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(req, timeout=1800) as r:
        reply = json.loads(r.read())
    return time.perf_counter() - start, reply


def start(arm: str, args, target: Path, log: Path) -> Server:
    port = free_port()
    if arm.startswith("llama-server"):
        cmd = [args.llama_server, "-m", str(target), "-t", str(args.threads), "-c", str(args.ctx), "--host", "127.0.0.1",
               "--port", str(port), "-np", "1", *(["--spec-default"] if arm.endswith("spec") else [])]
        return Server(arm, cmd, port, log)
    scratch = Path(tempfile.mkdtemp(prefix="fa-"))
    cmd = [sys.executable, "-m", "specllama", "serve", "--port", str(port), "--threads", str(args.threads),
           "--ctx", str(args.ctx), "--parallel", "1", "--flash-attn", arm.rsplit(" ", 1)[1]]
    env = {"SPECLLAMA_COSTS": str(scratch / "costs"), "SPECLLAMA_PROMPT_CACHE": str(scratch / "prompt-cache")}
    return Server(arm, cmd, port, log, env=env, scratch=scratch)


def run_arm(arm: str, args, target: Path, log: Path, text: str) -> list[dict]:
    server = start(arm, args, target, log)
    asks = [("plain", f"engine.py:\n```python\n{text}```\n\nSummarise what this module does, then list its classes.",
             args.plain_tokens),
            ("speculative", f"engine.py:\n```python\n{text}```\n\nRename the class Engine to Decoder everywhere. "
                            "Return the whole file, in one code block.", args.spec_tokens)]
    out = []
    try:
        for kind, ask, max_tokens in asks:
            if kind == "plain" and arm == "llama-server-spec" or kind == "speculative" and arm == "llama-server":
                continue
            body = {"model": server.model, "messages": [{"role": "user", "content": ask}], "max_tokens": max_tokens,
                    "temperature": 0}
            if arm.startswith("specllama"):
                body["drafter"] = "none" if kind == "plain" else "auto"
            wall, reply = post(server, body)
            t = reply.get("timings") or {}
            out.append({"arm": arm, "kind": kind, "wall_s": round(wall, 2), "prompt_n": t.get("prompt_n"),
                        "cache_n": t.get("cache_n"), "prompt_per_s": t.get("prompt_per_second"),
                        "tokens": t.get("predicted_n"), "gen_s": round((t.get("predicted_ms") or 0) / 1000, 2),
                        "gen_per_s": t.get("predicted_per_second"), "drafted": t.get("draft_n"),
                        "accepted": t.get("draft_n_accepted")})
    finally:
        server.stop()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--chars", type=int, default=12000, help="characters of the source file sent (default 12000)")
    ap.add_argument("--plain-tokens", type=int, default=128)
    ap.add_argument("--spec-tokens", type=int, default=400)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--out")
    args = ap.parse_args(argv)

    registry = load_registry()
    target = store.ensure(registry.model(registry.pair(None).target))
    text = SOURCE.read_text()[:args.chars]
    log = Path(tempfile.mkdtemp(prefix="fa-logs-")) / "servers.log"
    results = []
    for r in range(args.rounds):
        for arm in (ARMS if r % 2 == 0 else ARMS[::-1]):
            for res in run_arm(arm, args, target, log, text):
                res["round"] = r
                results.append(res)
                print(f"round {r} {arm:18s} {res['kind']:11s} prompt {res['prompt_n']} at {res['prompt_per_s']:.1f}/s, "
                      f"{res['tokens']} tokens at {res['gen_per_s']:.2f}/s ({res['gen_s']} s), wall {res['wall_s']} s, "
                      f"drafts {res['accepted']}/{res['drafted']}", flush=True)

    def med(arm: str, kind: str, key: str) -> float | None:
        values = [x[key] for x in results if x["arm"] == arm and x["kind"] == kind and x[key] is not None]
        return statistics.median(values) if values else None

    head = (f"Machine: {cpu_model()}, {os.cpu_count()} CPUs; threads {args.threads}; thread wait "
            f"{os.environ.get('SPECLLAMA_THREAD_WAIT', 'auto')}; target {target.name}; -c {args.ctx}, one slot; greedy; "
            f"{SOURCE.name}'s first {args.chars} characters as the file; {args.rounds} round(s), medians.\n"
            f"llama-server: {args.llama_server} ({llama_server_version(args.llama_server)}), its default attention "
            f"(flash attention auto: on for this CPU).")
    lines = ["| server | request | prompt tok/s (cold) | generated | gen tok/s | gen seconds | drafts accepted |",
             "|---|---|---|---|---|---|---|"]
    for kind in ("plain", "speculative"):
        for arm in ARMS:
            if med(arm, kind, "gen_per_s") is None:
                continue
            drafts = f"{med(arm, kind, 'accepted') or 0:.0f}/{med(arm, kind, 'drafted') or 0:.0f}"
            lines.append(f"| {arm} | {kind} | {med(arm, kind, 'prompt_per_s'):.1f} | {med(arm, kind, 'tokens'):.0f} | "
                         f"{med(arm, kind, 'gen_per_s'):.2f} | {med(arm, kind, 'gen_s'):.2f} | {drafts} |")
    print(head)
    print("\n".join(lines))
    if args.out:
        write_report(args.out, "Flash attention at depth, ours and llama-server's", "flash_attention.py", argv, head,
                     lines, {"runs": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
