"""Human-readable summaries of a generation, shared by run, batch and chat."""

from __future__ import annotations

from specllama.decoding.acceptance import Calibrator
from specllama.decoding.engine import GenerationConfig, Summary
from specllama.runtime import Runtime

CUT_AFTER = ("auto", "suffix")  # drafters whose drafts the planner cuts after drafting (confident)
MATCH_CLASSES = ("match 1-2", "match 3-7", "match 8-15", "match 16+")  # suffix_drafter.match_group


def format_summary(s: Summary, runtime: Runtime, config: GenerationConfig) -> str:
    lines = [
        runtime.describe(config),
        f"drafter {s.drafter}, k {config.k if s.drafter != 'none' else 0}"
        + (f" ({_auto_k(s)})" if config.k == "auto" and s.drafter != "none" else "") + ", "
        + ("greedy" if config.sampling.greedy else f"temp {config.sampling.temperature}"),
        f"prompt {s.prompt_tokens} tokens ({s.reused_tokens} reused from cache) in {s.t_prompt:.2f} s",
        f"generated {s.tokens} tokens in {s.t_generate:.2f} s: {s.tokens_per_s:.2f} tokens/s "
        f"(finish: {s.finish_reason})",
    ]
    if s.drafted:
        per_pos = " ".join(f"{p:.2f}" for p in s.per_position)
        lines.append(f"acceptance {s.acceptance:.1%} ({s.accepted}/{s.drafted}), mean accepted length "
                     f"{s.mean_accepted:.2f} tokens/step over {s.steps} steps; per position: {per_pos}")
    if s.drafted_by:
        lines.append("drafts by source: " + ", ".join(
            f"{source} {s.accepted_by.get(source, 0)}/{n} accepted" for source, n in sorted(s.drafted_by.items())))
    suffix = getattr(runtime, "suffix", None)
    if suffix is not None and s.drafted_by.get("suffix"):
        lines.append(calibration_text(suffix.calibrator))
    total = s.t_draft + s.t_verify + s.t_python
    if total > 0:
        lines.append(f"time: draft {s.t_draft:.2f} s ({s.t_draft / total:.0%}), verify {s.t_verify:.2f} s "
                     f"({s.t_verify / total:.0%}), python {s.t_python * 1e3:.0f} ms ({s.t_python / total:.1%}); "
                     f"{s.t_python / max(s.steps, 1) * 1e3:.2f} ms python per step")
        outside = max(0.0, total - s.t_llama)
        lines.append(f"inside llama_decode {s.t_llama:.2f} s; outside it {outside / max(s.steps, 1) * 1e3:.2f} ms a step "
                     f"({outside / total:.0%} of step time: batches, logits, verification, Python)")
    lines += step_cost_lines(runtime.costs)
    timed = getattr(runtime, "llama_decode_time", None)
    if timed:
        lines.append("llama_decode since loading: " + ", ".join(
            f"{name} {calls} calls, {seconds:.2f} s ({seconds / calls * 1e3:.2f} ms each)"
            for name, (calls, seconds) in timed().items() if calls))
    return "\n".join(lines)


def step_cost_lines(costs) -> list[str]:
    """What steps cost here, by kind and rows, as the planner knows it now (runtime.costs)."""
    t1 = costs.t1()
    if t1 is None or not costs.observed_rows():
        return []
    rows = [f"{n} row{'s' if n > 1 else ''} {costs.seconds(n) * 1e3:.1f} ms ({costs.ratio(n):.2f}x, n={costs.samples(n)})"
            for n in costs.observed_rows()]
    lines = ["step costs learnt here (target, by rows in the decode): " + "; ".join(rows)]
    c = costs.draft_ratio()
    if costs.draft and c is not None:
        lines.append(f"draft decode {c * t1 * 1e3:.1f} ms a draft position (c = {c:.2f} of a plain step, n={len(costs.draft)})")
    return lines


def _auto_k(s: Summary) -> str:
    # auto's and suffix's drafts are cut after drafting, under a cap: what was sent is the length.
    if s.drafter in CUT_AFTER:
        return f"mean drafted {s.drafted / s.steps if s.steps else 0.0:.2f} a step"
    return f"mean chosen {s.mean_k:.2f}"


def calibration_text(calibrator: Calibrator) -> str:
    """The suffix drafter's confidence calibration, bins with evidence only: raw confidence range ->
    the acceptance it now predicts / the acceptance observed (judged drafts)."""
    rows = [r for r in calibrator.report() if r.count]
    if not rows:
        return "suffix calibration: no drafts judged yet"
    parts = [f"{MATCH_CLASSES[r.group] if r.group < len(MATCH_CLASSES) else r.group} "
             f"raw {r.low:.1f}-{r.high:.1f}: predicted {r.predicted:.2f} / observed {r.observed:.2f} (n={r.count})"
             for r in rows]
    return "suffix calibration (predicted / observed acceptance):\n  " + "\n  ".join(parts)


def summary_json(s: Summary, runtime: Runtime, config: GenerationConfig) -> dict:
    """The same facts as format_summary, as plain JSON values for `run --json` (times in seconds)."""
    return {
        "finish_reason": s.finish_reason,
        "target": runtime.target_path.name,
        "draft": runtime.draft_path.name if runtime.draft_path else None,
        "drafter": s.drafter,
        "k": config.k if s.drafter != "none" else 0,
        "temperature": config.sampling.temperature,
        "seed": config.sampling.seed,
        "prompt_tokens": s.prompt_tokens,
        "reused_tokens": s.reused_tokens,
        "tokens": s.tokens,
        "t_prompt_s": s.t_prompt,
        "t_generate_s": s.t_generate,
        "tokens_per_s": s.tokens_per_s,
        "steps": s.steps,
        "drafted": s.drafted,
        "accepted": s.accepted,
        "acceptance": s.acceptance,
        "mean_accepted": s.mean_accepted,
        "per_position_acceptance": s.per_position,
        "drafted_by": dict(s.drafted_by),
        "accepted_by": dict(s.accepted_by),
        "t_draft_s": s.t_draft,
        "t_verify_s": s.t_verify,
        "t_python_s": s.t_python,
    }
