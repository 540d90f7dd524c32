"""Per prompt, what drafting itself gained or lost, told apart from the machine's drift between runs.

Why: on the 2-vCPU Xeon VM a one-row step's median moves from 71 to 91 ms between 8-second runs
of the same work (bench/measured/xeon-20261127-plain-step-drift: one pair differed by 10 ms inside
`llama_decode` alone), so a per-prompt tok/s ratio over 2-4 repeats moves by +-10 % and a "worst
prompt" figure mostly names the unluckiest pair. Here each `auto` run's drafting steps are priced
against that same run's plain steps: a drafting step's excess over the run's median plain step is
what it cost, each accepted draft saved one such step, asking on the other steps cost its time, and
the net (saved - cost) is a share of the run's time (bench/own_steps.py): drafting's own effect on
the prompt. What it cannot see is a plain step made slower by the drafting around it (the same
file: 16 pairs, median -0.8 ms inside `llama_decode`).
`specllama bench` reports the same net per prompt (bench/own_steps.py: `drafting_net`); this adds each
round's net and the plain runs' own spread (their plain-step medians, run to run) as the noise.

Runs as `specllama bench` does: one engine, prompts in file order, `none` and `auto` alternating
which goes first, caches emptied between runs, the cost cache and the suffix drafter's calibration
kept; a fresh cost cache unless SPECLLAMA_COSTS names one.

    flock /tmp/specllama-heavy.lock env SPECLLAMA_COSTS=$(mktemp -d) .venv/bin/python \\
        scripts/measure/prompt_steps.py --prompts bench/prompts_unseen.jsonl --repeat 3 --out bench/measured/NAME
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
from pathlib import Path

from specllama.llama import thread_wait

CONFIGS = "none;auto:k=auto"


def run_steps(runner, prompt: list[int], config, n: int) -> dict:
    """One generation as `specllama bench` runs it (BenchRunner.run_once: caches emptied around it): its
    tokens/s and its drafting priced on its own plain steps (bench/own_steps.py, bench's drafting_net)."""
    _, ids, steps = runner.run_once(config, prompt, n)
    return {"seconds": steps.seconds, "tok_s": len(ids) / steps.seconds if steps.seconds else 0.0,
            "plain_step_s": statistics.median(steps.plain) if steps.plain else None,
            "drafting_steps": len(steps.drafting), "drafted": sum(d for _, d, _ in steps.drafting),
            "accepted": sum(a for _, _, a in steps.drafting), "net_share": steps.net_share()}


def measure(prompts_file: Path, repeat: int, n: int, temperature: float, seed: int) -> dict:
    from specllama.batch.prompts_file import read_prompts
    from specllama.bench.configs import parse_configs
    from specllama.bench.runner import BenchRunner
    from specllama.decoding.sampling import SamplingParams
    from specllama.llama.machine import cpu_model
    from specllama.runtime.loaded import open_runtime
    from specllama.runtime.options import LoadOptions

    configs = parse_configs(CONFIGS)
    sampling = SamplingParams(temperature=temperature, seed=seed)
    items = read_prompts(prompts_file).items
    runs = []
    with open_runtime(LoadOptions(load_draft=False)) as runtime:
        prompts = [(str(item.id), runtime.prompt_tokens(item.prompt, item.system)) for item in items]
        runner = BenchRunner(runtime, [], configs, max_tokens=n, sampling=sampling)
        for config in configs:  # bench's warm-up: weights paged in, buffers sized
            run_steps(runner, prompts[0][1], config, 8)
        for r in range(repeat):
            for index, (pid, prompt) in enumerate(prompts):
                shift = (index + r) % len(configs)  # bench's order: who goes first alternates
                for config in configs[shift:] + configs[:shift]:
                    run = run_steps(runner, prompt, config, n)
                    runs.append({"prompt": pid, "config": config.label, "round": r, **run})
                    print(f"  {config.label:12s} {pid:18s} round {r}: {run['tok_s']:.2f} tok/s, plain step "
                          f"{_ms(run['plain_step_s'])}, drafting's net {_pct(run['net_share'])}", flush=True)
        threads = runtime.describe().threads
    return {"machine": f"{cpu_model()}, {threads} threads", "python": platform.python_version(),
            "prompts": str(prompts_file), "repeat": repeat, "max_tokens": n, "temperature": temperature,
            "seed": seed, "thread_wait": thread_wait.in_force(), "runs": runs, "prompts_summary": summarise(runs)}


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


def _pct(share: float | None) -> str:
    return "- (no plain step to price on)" if share is None else f"{share * 100:+.1f} %"


def summarise(runs: list[dict]) -> list[dict]:
    out = []
    for pid in dict.fromkeys(r["prompt"] for r in runs):
        plain = [r for r in runs if r["prompt"] == pid and r["config"] == "none"]
        auto = [r for r in runs if r["prompt"] == pid and r["config"] != "none"]
        steps = [r["plain_step_s"] for r in plain if r["plain_step_s"]]
        nets = [r["net_share"] for r in auto if r["net_share"] is not None]
        ratio = statistics.median(r["tok_s"] for r in auto) / statistics.median(r["tok_s"] for r in plain)
        out.append({"prompt": pid, "ratio": ratio, "net_share": statistics.median(nets) if nets else None,
                    "net_shares": nets, "plain_step_spread": max(steps) / min(steps) - 1,
                    "drafted": sum(r["drafted"] for r in auto), "accepted": sum(r["accepted"] for r in auto)})
    return out


def markdown(doc: dict) -> str:
    lines = [f"# Drafting's own net per prompt ({doc['prompts']}, {doc['repeat']} rounds, -n {doc['max_tokens']}, "
             f"temperature {doc['temperature']})", "",
             f"{doc['machine']}, thread wait {doc['thread_wait']}. tok/s ratio: median `auto` over median `none`; "
             "drafting's net: per `auto` run, (accepted drafts x the run's median plain step - the drafting steps' "
             "excess over it - asking on the other steps) / the run's time (bench/own_steps.py), median over rounds; "
             "plain runs' spread: their plain-step medians, "
             "slowest over fastest - 1 (the machine's drift between runs, with no change in the work).", "",
             "| prompt | tok/s ratio | drafting's net (rounds) | plain runs' spread | drafted / accepted |",
             "|---|---|---|---|---|"]
    for p in doc["prompts_summary"]:
        rounds = " ".join(f"{x * 100:+.1f}" for x in p["net_shares"])
        lines.append(f"| {p['prompt']} | {p['ratio']:.3f}x | **{_pct(p['net_share'])}** ({rounds}) | "
                     f"{p['plain_step_spread'] * 100:.0f} % | {p['drafted']} / {p['accepted']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=Path, default=Path("bench/prompts_unseen.jsonl"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("-n", type=int, default=96)
    parser.add_argument("--temp", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, help="write OUT.json and OUT.md")
    args = parser.parse_args()
    thread_wait.configure()  # before llama.cpp loads, as every command does
    doc = measure(args.prompts, args.repeat, args.n, args.temp, args.seed)
    text = markdown(doc)
    print(text)
    if args.out:
        args.out.with_suffix(".json").write_text(json.dumps(doc, indent=1))
        args.out.with_suffix(".md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
