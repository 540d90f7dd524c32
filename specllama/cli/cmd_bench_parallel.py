"""`specllama bench --parallel 1,4,auto`: batch throughput with N prompts per decode, N = 1 the
baseline, interleaved rounds (see bench/parallel.py)."""

from __future__ import annotations

import argparse
import json

from specllama.errors import UsageError


class ParallelListError(UsageError):
    """--parallel names something that is not a number of prompts or 'auto'."""


def parse_levels(text: str) -> list[int | str]:
    from specllama.decoding.request import PARALLEL_MAX

    levels: list[int | str] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if part == "auto":
            levels.append(part)
            continue
        if not part.isdigit() or not 1 <= int(part) <= PARALLEL_MAX:
            raise ParallelListError(f"--parallel: expected numbers 1..{PARALLEL_MAX} or 'auto', got {part!r}")
        levels.append(int(part))
    if not levels:
        raise ParallelListError("--parallel is empty: give e.g. 1,4,auto")
    return [1] + [n for n in dict.fromkeys(levels) if n != 1]  # N = 1 is the baseline, always first


def cmd_bench_parallel(args: argparse.Namespace, prompt_items, status) -> int:
    from dataclasses import asdict, replace

    from specllama.bench.parallel import run_parallel_bench, summarize
    from specllama.cli.options import resolved_for
    from specllama.cli.progress import bench_progress, download_bar
    from specllama.cli.stability_note import parallel_text_note
    from specllama.decoding.engine import GenerationConfig
    from specllama.decoding.request import PARALLEL_AUTO_MAX
    from specllama.llama.machine import machine_info, peak_rss_bytes
    from specllama.runtime.loaded import open_runtime

    levels = parse_levels(args.parallel)
    slots = max([n for n in levels if n != "auto"] + ([PARALLEL_AUTO_MAX] if "auto" in levels else []))
    resolved = resolved_for(args, status, session_drafters=("none",))
    # No more slots than prompts: each is a whole sequence of KV cache, allocated whether used or not.
    opts = replace(resolved.load, parallel=slots, prompts=len(prompt_items))
    with download_bar() as fetch:
        runtime = open_runtime(opts, resolved.registry, progress=fetch, status=status)
    with runtime:
        chosen = {n: runtime.parallelism_for(n) for n in levels}
        note = parallel_text_note(max(chosen.values()), greedy=resolved.settings.sampling.temperature == 0, exact=args.exact)
        if note:
            status.say(note)
        labels = {chosen[n]: ("auto (%d)" % chosen[n]) if n == "auto" else str(n) for n in levels}
        ns = list(dict.fromkeys(chosen.values()))
        prompts = [runtime.prompt_tokens(item.prompt, item.system) for item in prompt_items]
        config = GenerationConfig(max_tokens=args.max_tokens, drafter="none", k=0,
                                  sampling=resolved.settings.sampling)
        with bench_progress() as progress:
            runs = run_parallel_bench(runtime, prompts, config, ns, args.repeat,
                                      progress=lambda done, total, what: progress(done, total, what, None))
        summaries = summarize(runs, runtime.costs.ratio, labels)
        info = runtime.describe()
        machine = machine_info(info.threads, info.threads_batch, placement=info.placement, gpu_layers=info.gpu_layers,
                           flash_attn=info.flash_attn)
        models = {"target": info.target.file}
        peak = peak_rss_bytes()  # None on Windows (no getrusage)
        rss = peak / (1 << 20) if peak is not None else None
        slots = info.slots  # what was allocated (cut to the prompts)
        doc = {"kind": "parallel", "machine": machine, "models": models, "slots": slots,
               "n_ctx_per_sequence": info.n_ctx, "max_tokens": args.max_tokens, "rounds": args.repeat,
               "prompts_file": str(args.prompts), "peak_rss_mb": round(rss, 1) if rss is not None else None,
               "costs": runtime.costs.snapshot(),
               "summaries": [asdict(s) for s in summaries], "runs": [asdict(r) for r in runs]}
    text = table(summaries, machine, models, rss, slots, args)
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 1 if any(r.failed for r in runs) else 0


def table(summaries, machine: dict, models: dict, rss: float | None, slots: int, args) -> str:
    def pct(x):
        return f"{x:.2f}x" if x is not None else "-"

    lines = [f"machine: {machine.get('cpu', '?')}, {machine.get('threads')} threads, {machine.get('placement')}; "
             f"target {models['target']}; {args.max_tokens} tokens a prompt, {args.repeat} round(s), "
             f"{slots} cache sequences; peak RSS " + (f"{rss:.0f} MB" if rss is not None else "not known here"),
             "",
             "| prompts at once | job tokens/s (median) | vs 1 at a time (median of rounds) | predicted N/T(N) "
             "| decode time / curve's prediction | median prompt latency |",
             "|---|---|---|---|---|---|"]
    for s in summaries:
        lines.append(f"| {s.label} | {s.median_tokens_per_s:.2f} | {pct(s.median_ratio)} | {pct(s.predicted_ratio)} "
                     f"| {pct(s.decode_vs_predicted)} | {s.latency_median_s:.1f} s |")
    return "\n".join(lines)
