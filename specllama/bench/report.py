"""Benchmark output: the terminal table, the Markdown table and the JSON document.

The JSON schema is documented in docs/benchmarks.md; bump SCHEMA when a field changes
meaning or disappears (adding fields is compatible).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

from specllama.bench.aggregate import ConfigSummary, PromptResult
from specllama.bench.shared_text import MIN_SHARED_TOKENS
from specllama.decoding.cost.curve import CostCurve
from specllama.decoding.cost.online import switch_verdict

SCHEMA = "specllama.bench/1"

HEADERS = ["config", "tok/s", "speedup", "min", "predicted", "pred. (steps)", "acceptance", "mean accepted",
           "draft / verify / python", "identical to none"]


def _x(v: float | None) -> str:
    return f"{v:.2f}x" if v is not None else "-"


def _pct(v: float | None) -> str:
    return f"{v:.0%}" if v is not None else "-"


def _identical(counts: dict | None) -> str:
    if counts is None:
        return "- (sampled, no seed)"
    total = sum(counts.values())
    text = f"{counts['identical']}/{total}"
    if counts.get("parted"):
        text += f" ({counts['parted']} parted: sampled rows rounded apart)"
    if counts["near_tie"]:
        text += f" (+{counts['near_tie']} near-tie)"
    if counts["different"]:
        text += f", {counts['different']} DIFFERENT"
    return text


def summary_rows(summaries: list[ConfigSummary]) -> list[list[str]]:
    rows = []
    for s in summaries:
        if s.failed and not s.runs:
            rows.append([s.config, "failed: " + s.failed])  # a short row: the message spans the table
            continue
        split = s.time_split
        shares = " / ".join(_pct(split[p]["share"]) for p in ("draft", "verify", "python")) if split else "-"
        rows.append([
            s.config, f"{s.tokens_per_s:.2f}" if s.tokens_per_s is not None else "-",
            _x(s.geomean_speedup), _x(s.min_speedup), _x(s.predicted_speedup), _x(s.predicted_from_steps),
            _pct(s.acceptance) if s.drafter != "none" else "-",
            f"{s.mean_accepted:.2f}" if s.mean_accepted else "-",
            shares, _identical(s.identical),
        ])
    return rows


def cost_curve_line(curve: CostCurve | None, head_cost: float | None = None, switch: float | None = None) -> str:
    """The learnt step costs; `head_cost`: the target's MTP head's c, where its drafts were timed;
    `switch`: the plain steps after a draft beyond T(1) (cost/online.py: a GPU's CUDA graphs)."""
    if curve is None:
        return "step costs: not known"
    ratios = " ".join(f"{r:.2f}" for r in curve.ratios)
    c = f"{curve.draft_ratio:.2f}" if curve.draft_ratio is not None else "- (no draft model)"
    head = f"; MTP head c = {head_cost:.2f} a draft position" if head_cost is not None else ""
    back = ""
    if switch is not None:
        back = f"; going back to plain decoding after a draft: {switch:+.2f} plain steps ({switch_verdict(switch)})"
    return (f"step costs learnt from {curve.reps} steps: T(1) = {curve.t1_s * 1e3:.1f} ms; T(n)/T(1) for "
            f"n = 1..{curve.max_n}: {ratios}; draft/target cost ratio c = {c}{head}{back}")


def drafting_net_lines(summaries: list[ConfigSummary]) -> list[str]:
    """Per drafting config, its drafts' own net on the worst prompt and the median one (own_steps.py):
    what the tok/s ratios say with the machine's drift between runs left out."""
    return [f"drafting's own net, {s.config}: worst prompt {s.min_drafting_net:+.1%} ({s.min_drafting_net_prompt}), "
            f"median prompt {s.median_drafting_net:+.1%} of the run's time (each run's drafting steps priced on its "
            "own plain steps: the machine's drift between runs left out)"
            for s in summaries if s.min_drafting_net is not None]


def shared_text_lines(summaries: list[ConfigSummary]) -> list[str]:
    """Per drafting config, its speed over the text each run shares with plain decoding's (shared_text.py):
    the tok/s ratios with the luck of a parted text left out."""
    lines = []
    for s in summaries:
        if s.shared_runs is None:
            continue
        runs = s.shared_runs
        counted = (f"runs timed over their whole text {runs['whole']}, up to where they parted {runs['prefix']}, "
                   f"left out {runs['left_out']} (parted before token {MIN_SHARED_TOKENS})")
        if s.shared_geomean is None:
            lines.append(f"over the text shared with plain decoding, {s.config}: no run timed; {counted}")
            continue
        lines.append(f"over the text shared with plain decoding, {s.config}: {s.shared_geomean:.2f}x, worst prompt "
                     f"{s.shared_min:.2f}x ({s.shared_min_prompt}); {counted}")
    return lines


def terminal_table(summaries: list[ConfigSummary], curve: CostCurve | None, machine: dict,
                   head_cost: float | None = None, switch: float | None = None) -> str:
    rows = [HEADERS] + summary_rows(summaries)
    full = [r for r in rows if len(r) == len(HEADERS)]
    widths = [max(len(r[i]) for r in full) for i in range(len(HEADERS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines += [""] + drafting_net_lines(summaries) + shared_text_lines(summaries)
    lines += [cost_curve_line(curve, head_cost, switch), _machine_line(machine),
              "speedup: geometric mean over prompts of (tok/s / tok/s of none on the same prompt); "
              "predicted: the cost model E / (K*c + T(K+1)/T(1)) at the measured acceptance; "
              "pred. (steps): the same cost model over the steps as they happened"]
    return "\n".join(lines)


def _machine_line(machine: dict) -> str:
    placement = f"models on {machine['placement']}, " if machine.get("placement") else ""
    peak = machine.get("peak_rss_bytes")  # None where the platform cannot tell (Windows)
    catch_up = f", the draft's catch-up {machine['draft_catch_up']}" if machine.get("draft_catch_up") else ""
    return (f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['threads']} threads, {placement}"
            f"llama-cpp-python {machine['llama_cpp_python']}, "
            f"peak RSS {f'{peak / 2**20:,.0f} MiB' if peak is not None else 'not known here'}{catch_up}")


def markdown(summaries: list[ConfigSummary], curve: CostCurve | None, machine: dict, models: dict,
             head_cost: float | None = None, switch: float | None = None) -> str:
    rows = summary_rows(summaries)
    out = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in r + [""] * (len(HEADERS) - len(r))) + " |"
            for r in rows]
    draft = models.get("draft")
    nets = drafting_net_lines(summaries) + shared_text_lines(summaries)
    if nets:
        out += [""] + [line + "." for line in nets]
    out += ["", f"Target `{models['target']['file']}`" + (f", draft `{draft['file']}`" if draft else "") + ". "
            + _machine_line(machine) + "."]
    if curve is not None:
        out += ["", "| n | " + " | ".join(str(n) for n in range(1, curve.max_n + 1)) + " |",
                "|---|" + "---|" * curve.max_n,
                "| T(n)/T(1) | " + " | ".join(f"{r:.2f}" for r in curve.ratios) + " |",
                "", cost_curve_line(curve, head_cost, switch) + "."]
    return "\n".join(out) + "\n"


def json_document(*, settings: dict, machine: dict, models: dict, curve: CostCurve | None,
                  results: list[PromptResult], summaries: list[ConfigSummary], switch: float | None = None) -> dict:
    return {
        "schema": SCHEMA,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "settings": settings,
        "machine": machine,
        "models": models,
        "cost_curve": curve.to_dict() if curve is not None else None,
        # The plain steps after a draft beyond T(1), in plain steps (cost/online.py's switch cost).
        "switch_back_ratio": switch,
        "results": [asdict(r) for r in results],
        "summary": [asdict(s) for s in summaries],
    }


def write_text(path: str | Path, text: str) -> None:
    path = Path(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def write_json(path: str | Path, document: dict) -> None:
    write_text(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
