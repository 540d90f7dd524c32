#!/usr/bin/env python3
"""A small batch at each --parallel setting: whole-job wall time and peak RSS, interleaved.

Each run is `specllama batch` in its own process under `/usr/bin/time -v` (the model load, the
KV cache allocation and the answers all count, as a user waits for them), on the first COUNT
prompts of a file, into a fresh output file. The settings take turns within every repeat (a
rotating order, so none always runs first on a machine whose load drifts). A setting may carry
its own code: `auto@DIR` runs `--parallel auto` with DIR put first on PYTHONPATH (e.g. an export
of the commit before a change), so before and after are measured side by side.

    flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/parallel_small.py \\
        --settings 1 2 3 auto --repeats 3 --out bench/measured/NAME

Writes NAME.json (every run) and NAME.md (medians and ratios against the best fixed N).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from specllama.llama.machine import cpu_model  # noqa: E402


def one_run(setting: str, prompts: Path, max_tokens: int, threads: int | None, extra: list[str], fresh: bool) -> dict:
    parallel, _, code = setting.partition("@")
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    if code:
        env["PYTHONPATH"] = code + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory(prefix="specllama-parallel-") as tmp:
        if fresh:  # every run starts from the same knowledge: none (a fresh machine), not the last run's
            env["SPECLLAMA_COSTS"] = str(Path(tmp) / "costs")
        out = Path(tmp) / "out.jsonl"
        cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "specllama", "batch", str(prompts), "-o", str(out),
               "--parallel", parallel, "-n", str(max_tokens), *extra] + (["-t", str(threads)] if threads else [])
        started = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"{setting}: exit {done.returncode}\n{done.stderr[-2000:]}")
        answers = [json.loads(line) for line in out.read_text().splitlines()]
    rss_kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))
    chose = [line for line in done.stderr.splitlines() if "per decode" in line]
    return {"setting": setting, "wall_s": round(wall, 3), "peak_rss_kib": rss_kib,
            "tokens": sum(a.get("tokens", 0) for a in answers), "status_line": chose[0] if chose else "",
            "texts": [a.get("text", "") for a in answers]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", default=str(REPO / "bench" / "prompts.jsonl"))
    ap.add_argument("--count", type=int, default=3, help="the first COUNT prompts of the file (default 3)")
    ap.add_argument("--settings", nargs="+", default=["1", "2", "3", "auto"],
                    help="--parallel values, each optionally @DIR for the code to run (default: 1 2 3 auto)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("-n", "--max-tokens", type=int, default=64)
    ap.add_argument("-t", "--threads", type=int)
    ap.add_argument("--extra", default="", help="more batch options, one string (e.g. '--drafter none')")
    ap.add_argument("--learned-costs", action="store_true",
                    help="use this machine's learnt step costs (default: each run from an empty cost cache)")
    ap.add_argument("--out", required=True, help="bench/measured/NAME (writes NAME.json and NAME.md)")
    args = ap.parse_args()

    lines = [line for line in Path(args.prompts).read_text().splitlines() if line.strip()][:args.count]
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write("\n".join(lines) + "\n")
        prompts = Path(f.name)
    runs = []
    settings = list(args.settings)
    for repeat in range(args.repeats):
        order = settings[repeat % len(settings):] + settings[:repeat % len(settings)]
        for setting in order:
            run = one_run(setting, prompts, args.max_tokens, args.threads, args.extra.split(), not args.learned_costs)
            run["repeat"] = repeat
            runs.append(run)
            print(f"[{repeat}] --parallel {setting}: {run['wall_s']:.2f} s, peak RSS {run['peak_rss_kib'] / 1e6:.2f} GB "
                  f"({run['status_line'].removeprefix('specllama: ')})", file=sys.stderr, flush=True)
    prompts.unlink()

    medians = {s: {"wall_s": statistics.median(r["wall_s"] for r in runs if r["setting"] == s),
                   "peak_rss_kib": statistics.median(r["peak_rss_kib"] for r in runs if r["setting"] == s)}
               for s in settings}
    fixed = [s for s in settings if s.isdigit()]
    best = min(fixed, key=lambda s: medians[s]["wall_s"]) if fixed else None
    machine = {"cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
               "threads": args.threads or "default (all cores available)"}
    record = {"command": " ".join(sys.argv), "machine": machine, "prompts": args.prompts, "count": args.count,
              "costs": "learnt here" if args.learned_costs else "a fresh, empty cost cache per run",
              "max_tokens": args.max_tokens, "repeats": args.repeats, "extra": args.extra, "best_fixed": best,
              "medians": medians, "runs": runs}
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")

    md = [f"# `batch --parallel` on {args.count} prompts: wall time and peak RSS",
          "", f"Machine: {machine['cpu']}, {machine['cores']} cores, threads {machine['threads']}. "
          f"The first {args.count} prompts of `{Path(args.prompts).name}`, {args.max_tokens} tokens at most, "
          f"{args.repeats} interleaved repeats, each run a fresh process under `/usr/bin/time -v` (load included), "
          f"costs: {record['costs']}."
          + (f" Extra options: `{args.extra}`." if args.extra else ""),
          "", f"Command: `{record['command']}`", "",
          "| --parallel | wall s (median) | vs best fixed N | peak RSS GB (median) | vs best fixed N | runs (s) | status line |",
          "|---|---|---|---|---|---|---|"]
    for s in settings:
        m = medians[s]
        ratio_t = f"{m['wall_s'] / medians[best]['wall_s']:.3f}" if best else "-"
        ratio_m = f"{m['peak_rss_kib'] / medians[best]['peak_rss_kib']:.3f}" if best else "-"
        each = ", ".join(f"{r['wall_s']:.2f}" for r in runs if r["setting"] == s)
        status = next((r["status_line"] for r in runs if r["setting"] == s), "").removeprefix("specllama: ")
        md.append(f"| {s} | {m['wall_s']:.2f} | {ratio_t} | {m['peak_rss_kib'] / 1e6:.2f} | {ratio_m} | {each} | {status} |")
    md += ["", f"Best fixed N by median time: {best}." if best else ""]
    out.with_suffix(".md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
