"""Schema-constrained generation: plain constrained decoding (--drafter none: the grammar's mask only)
against speculation with the grammar's forced tokens as free drafts (`suffix`: forced + suffix
drafts; `auto`: forced + suffix or the draft model, the default), interleaved, greedy, exact mode.

Each answer must parse and validate against its schema, and in exact mode every arm must give the
same text (checked; a difference is reported, never hidden). Prompts: bench/schema_prompts.jsonl
(held out: written for this measurement, not tuned on).

Usage (loads the default pair; ~15 min on 2 cores; run under `flock /tmp/specllama-heavy.lock`):
    python scripts/measure/grammar_speculation.py [--repeats 3] [--arms none,suffix,auto] [--out bench/measured/NAME]
Writes NAME.json and NAME.md when --out is given.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import jsonschema

from specllama.decoding.constraint import Constraint
from specllama.decoding.engine import GenerationConfig
from specllama.llama.machine import cpu_model
from specllama.runtime import LoadOptions, open_runtime

REPO = Path(__file__).resolve().parents[2]
SYSTEM = "You answer with JSON only."


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--arms", default="none,suffix,auto")
    ap.add_argument("--max-tokens", type=int, default=320)
    ap.add_argument("--prompts", default=str(REPO / "bench" / "schema_prompts.jsonl"))
    ap.add_argument("--default-mode", action="store_true",
                    help="the default (not exact) mode: more rows a step, texts may differ at near-ties")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    arms = args.arms.split(",")
    prompts = [json.loads(line) for line in Path(args.prompts).read_text().splitlines() if line.strip()]

    exact = not args.default_mode
    rt = open_runtime(LoadOptions(exact=exact, n_ctx=2048, load_draft="auto" in arms or "model" in arms))
    info = rt.describe()
    machine = {"cpu": cpu_model(), "platform": platform.platform(), "python": sys.version.split()[0],
               "threads": info.threads, "target": info.target.file, "draft": info.draft.file if info.draft else None,
               "exact": exact, "greedy": True, "max_tokens": args.max_tokens}
    print(json.dumps(machine), flush=True)
    runs = []
    for repeat in range(args.repeats):
        for i, p in enumerate(prompts):
            order = arms[(repeat + i) % len(arms):] + arms[:(repeat + i) % len(arms)]  # rotate who goes first
            tokens = rt.chat_tokens([{"role": "system", "content": SYSTEM}, {"role": "user", "content": p["prompt"]}])
            for arm in order:
                rt.reset()  # every run starts cold: no cache, no suffix history from another run
                config = GenerationConfig(max_tokens=args.max_tokens, drafter=arm,
                                          constraint=Constraint("json_schema", schema=p["schema"], strict=True))
                t0 = time.perf_counter()
                s = rt.generate(tokens, config).drain()
                wall = time.perf_counter() - t0
                try:
                    jsonschema.validate(json.loads(s.text), p["schema"])
                    valid = True
                except (ValueError, jsonschema.ValidationError):
                    valid = False
                run = {"repeat": repeat, "prompt": p["id"], "arm": arm, "tokens": s.tokens, "steps": s.steps,
                       "seconds": s.t_generate, "wall": wall, "tok_s": s.tokens_per_s, "finish": s.finish_reason,
                       "valid": valid, "drafted_by": dict(s.drafted_by), "accepted_by": dict(s.accepted_by), "text": s.text}
                runs.append(run)
                print(json.dumps({k: v for k, v in run.items() if k != "text"}), flush=True)
    result = summarise(runs, arms, prompts)
    result["machine"] = machine
    result["command"] = "python scripts/measure/grammar_speculation.py " + " ".join(argv or sys.argv[1:])
    print(markdown(result))
    if args.out:
        Path(args.out + ".json").write_text(json.dumps({**result, "runs": runs}, indent=1) + "\n")
        Path(args.out + ".md").write_text(markdown(result) + "\n")
    return 0


def summarise(runs: list[dict], arms: list[str], prompts: list[dict]) -> dict:
    base = arms[0]
    per_prompt, identical = [], True
    for p in prompts:
        row = {"prompt": p["id"]}
        texts = {r["text"] for r in runs if r["prompt"] == p["id"]}
        row["identical"] = len(texts) == 1
        identical &= row["identical"]
        for arm in arms:
            mine = [r for r in runs if r["prompt"] == p["id"] and r["arm"] == arm]
            row[arm] = {"median_s": statistics.median(r["seconds"] for r in mine), "tokens": mine[0]["tokens"],
                        "steps": mine[0]["steps"], "valid": all(r["valid"] for r in mine),
                        "finish": sorted({r["finish"] for r in mine})}
        for arm in arms[1:]:
            row[arm]["speedup"] = row[base]["median_s"] / row[arm]["median_s"]
        per_prompt.append(row)
    totals = {}
    for arm in arms:
        per_repeat = []
        for repeat in sorted({r["repeat"] for r in runs}):
            mine = [r for r in runs if r["arm"] == arm and r["repeat"] == repeat]
            per_repeat.append((sum(r["tokens"] for r in mine), sum(r["seconds"] for r in mine)))
        drafted, accepted = {}, {}
        for r in runs:
            if r["arm"] == arm:
                for source, n in r["drafted_by"].items():
                    drafted[source] = drafted.get(source, 0) + n
                    accepted[source] = accepted.get(source, 0) + r["accepted_by"].get(source, 0)
        totals[arm] = {"tok_s_per_repeat": [t / s for t, s in per_repeat], "seconds_per_repeat": [s for _, s in per_repeat],
                       "median_tok_s": statistics.median(t / s for t, s in per_repeat),
                       "tokens": per_repeat[0][0], "drafted_by": drafted, "accepted_by": accepted,
                       "valid": all(r["valid"] for r in runs if r["arm"] == arm)}
    for arm in arms[1:]:
        ratios = [b / a for a, b in zip(totals[arm]["seconds_per_repeat"], totals[base]["seconds_per_repeat"])]
        totals[arm]["speedup_per_repeat"] = ratios
        totals[arm]["median_speedup"] = statistics.median(ratios)
        totals[arm]["median_prompt_speedup"] = statistics.median(row[arm]["speedup"] for row in per_prompt)
    return {"arms": arms, "baseline": base, "identical_texts": identical, "per_prompt": per_prompt, "totals": totals}


def markdown(result: dict) -> str:
    m, arms, base = result.get("machine", {}), result["arms"], result["baseline"]
    lines = ["# Schema-constrained generation: grammar-forced drafts vs plain constrained decoding", "",
             f"Machine: {m.get('cpu')} ({m.get('platform')}), {m.get('threads')} threads; target {m.get('target')}, "
             f"draft {m.get('draft')}; {'exact' if m.get('exact') else 'default'} mode, greedy, max {m.get('max_tokens')} tokens; "
             f"prompts bench/schema_prompts.jsonl; command `{result.get('command', '')}`.", "",
             f"Every arm's text identical to every other's on every prompt and repeat: **{result['identical_texts']}**. "
             f"Every answer parses and validates: **{all(t['valid'] for t in result['totals'].values())}**.", "",
             "| arm | median tok/s (whole set, per repeat) | speedup vs " + base + " (median of repeats) | "
             "median per-prompt speedup | drafted / accepted by source |", "|---|---|---|---|---|"]
    for arm in arms:
        t = result["totals"][arm]
        by = ", ".join(f"{s} {t['accepted_by'].get(s, 0)}/{n}" for s, n in sorted(t["drafted_by"].items())) or "-"
        speed = f"{t['median_speedup']:.2f}x" if arm != base else "1"
        per = f"{t['median_prompt_speedup']:.2f}x" if arm != base else "1"
        rates = ", ".join(f"{x:.2f}" for x in t["tok_s_per_repeat"])
        lines.append(f"| {arm} | {t['median_tok_s']:.2f} ({rates}) | {speed} | {per} | {by} |")
    lines += ["", "| prompt | tokens | " + " | ".join(f"{a} s (steps)" for a in arms) + " | "
              + " | ".join(f"{a} speedup" for a in arms[1:]) + " | identical |",
              "|---|---|" + "---|" * (2 * len(arms) - 1) + "---|"]
    for row in result["per_prompt"]:
        cells = [f"{row[a]['median_s']:.1f} ({row[a]['steps']})" for a in arms]
        speed = [f"{row[a]['speedup']:.2f}x" for a in arms[1:]]
        lines.append(f"| {row['prompt']} | {row[base]['tokens']} | " + " | ".join(cells + speed) + f" | {row['identical']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
