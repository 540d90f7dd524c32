"""What a generation did, in words a user reads: one headline, the load and prompt line, then the
detail behind `--stats=full`. The one home of this text: `run --stats`, the chat's stats panel and
serve's per-request log line call the same `headline`.

The headline compares with plain decoding without running it: plain decoding makes one token per
plain step, so its time for the tokens the steps made (one a step plus the drafts accepted) is that
many T(1), with T(1) what a plain step costs as this run's own steps measured it (or, when the run
took no plain step, as earlier runs here did: the label says which), set against the steps' own
time on the same clock (drafting, the decode and the Python around it). A run that drafted nothing
is plain decoding and comes out near 1.00x.
"""

from __future__ import annotations

from specllama.decoding.cost.online import StepCosts, switch_verdict
from specllama.decoding.events import Summary
from specllama.decoding.request import GenerationConfig
from specllama.decoding.suffix_groups import group_label

CUT_AFTER = ("auto", "suffix")  # drafters whose drafts the planner cuts after drafting (confident)
SEP = " · "


def vs_plain(summary: Summary, costs: StepCosts | None) -> tuple[float, str] | None:
    """(speed relative to plain decoding, where T(1) came from), or None when it cannot be said."""
    step_s = summary.t_draft + summary.t_verify + summary.t_python
    if costs is None or step_s <= 0 or not summary.steps:
        return None
    t1 = costs.t1()
    if not t1:
        return None
    basis = "this run's own costs" if costs.samples(1) else "earlier runs' costs here"
    return (summary.steps + summary.accepted) * t1 / step_s, basis


def drafts_text(summary: Summary) -> str:
    if summary.drafter == "none":
        return "plain decoding"
    if not summary.drafted:
        return "no drafts"
    sources = sorted(summary.drafted_by)
    if len(sources) == 1:
        return f"{summary.accepted}/{summary.drafted} drafts accepted ({sources[0]})"
    by = ", ".join(f"{s} {summary.accepted_by.get(s, 0)}/{summary.drafted_by[s]}" for s in sources)
    return f"{summary.accepted}/{summary.drafted} drafts accepted ({by})"


def headline(summary: Summary, costs: StepCosts | None = None) -> str:
    """`128 tokens in 6.1 s · 21.0 tok/s · 1.31x vs plain (estimated from this run's own costs) ·
    97/120 drafts accepted (suffix)`."""
    parts = [f"{summary.tokens} tokens in {summary.t_generate:.1f} s", f"{summary.tokens_per_s:.1f} tok/s"]
    ratio = vs_plain(summary, costs) if summary.drafter != "none" else None
    if ratio is not None:
        parts.append(f"{ratio[0]:.2f}x vs plain (estimated from {ratio[1]})")
    parts.append(drafts_text(summary))
    return SEP.join(parts)


def short_headline(summary: Summary, costs: StepCosts | None = None) -> str:
    """The headline where a line is narrow (under a chat answer): `128 tokens · 21.0 tok/s · 1.31x vs plain`."""
    ratio = vs_plain(summary, costs) if summary.drafter != "none" else None
    return SEP.join([f"{summary.tokens} tokens", f"{summary.tokens_per_s:.1f} tok/s"]
                    + ([f"{ratio[0]:.2f}x vs plain"] if ratio else []))


def load_line(load_s: float | None, summary: Summary) -> str:
    """`load 2.3 s · prompt 45 tokens (12 reused) in 0.80 s, 56.2 tok/s`."""
    fresh = summary.prompt_tokens - summary.reused_tokens
    rate = f", {fresh / summary.t_prompt:.1f} tok/s" if summary.t_prompt > 0 and fresh > 0 else ""
    reused = f" ({summary.reused_tokens} reused)" if summary.reused_tokens else ""
    prompt = f"prompt {summary.prompt_tokens} tokens{reused} in {summary.t_prompt:.2f} s{rate}"
    return (f"load {load_s:.1f} s{SEP}" if load_s is not None else "") + prompt


def detail_lines(s: Summary, session, config: GenerationConfig) -> list[str]:
    """The detail block (`--stats=full`): models, the drafter's choices, acceptance by position and
    source, where the time went, what steps cost here."""
    lines = [
        session.describe().line(config),
        f"drafter {s.drafter}, k {config.k if s.drafter != 'none' else 0}"
        + (f" ({_auto_k(s)})" if config.k == "auto" and s.drafter != "none" else "") + ", "
        + ("greedy" if config.sampling.greedy else f"temp {config.sampling.temperature}")
        + f"; finish: {s.finish_reason}",
    ]
    if s.drafted:
        per_pos = " ".join(f"{p:.2f}" for p in s.per_position)
        lines.append(f"acceptance {s.acceptance:.1%} ({s.accepted}/{s.drafted}), mean accepted length "
                     f"{s.mean_accepted:.2f} tokens/step over {s.steps} steps; per position: {per_pos}")
    if s.drafted_by.get("suffix"):
        lines.append(calibration_text(session.suffix_calibration()))
    total = s.t_draft + s.t_verify + s.t_python
    if total > 0:
        lines.append(f"time: draft {s.t_draft:.2f} s ({s.t_draft / total:.0%}), verify {s.t_verify:.2f} s "
                     f"({s.t_verify / total:.0%}), python {s.t_python * 1e3:.0f} ms ({s.t_python / total:.1%}); "
                     f"{s.t_python / max(s.steps, 1) * 1e3:.2f} ms python per step")
        outside = max(0.0, total - s.t_llama)
        lines.append(f"inside llama_decode {s.t_llama:.2f} s; outside it {outside / max(s.steps, 1) * 1e3:.2f} ms a step "
                     f"({outside / total:.0%} of step time: batches, logits, verification, Python)")
    lines += step_cost_lines(session.costs)
    timed = session.llama_decode_time()
    if timed:
        lines.append("llama_decode since loading: " + ", ".join(
            f"{name} {calls} calls, {seconds:.2f} s ({seconds / calls * 1e3:.2f} ms each)"
            for name, (calls, seconds) in timed.items() if calls))
    return lines


def format_summary(s: Summary, session, config: GenerationConfig, *, full: bool = False) -> str:
    """What `--stats` prints: the headline, the load and prompt line, a drafter that is not paying,
    and with `full` the detail block."""
    lines = [headline(s, session.costs), load_line(session.describe().load_s, s)]
    note = session.drafter_note(s)
    if note is not None:
        lines.append(note.text)
    if full:
        lines += detail_lines(s, session, config)
    return "\n".join(lines)


def step_cost_lines(costs: StepCosts) -> list[str]:
    """What steps cost here, by kind and rows, as the planner knows it now (session.costs)."""
    t1 = costs.t1()
    if t1 is None or not costs.observed_rows():
        return []
    rows = [f"{n} row{'s' if n > 1 else ''} {costs.seconds(n) * 1e3:.1f} ms ({costs.ratio(n):.2f}x, n={costs.samples(n)})"
            for n in costs.observed_rows()]
    lines = ["step costs learnt here (target, by rows in the decode): " + "; ".join(rows)]
    switch = costs.aftermath_median()
    if switch is not None:
        lines.append(f"going back to plain decoding after a draft: {switch:+.2f} plain steps beyond T(1) "
                     f"(n={len(costs.aftermath)}; {switch_verdict(switch)})")
    c = costs.draft_ratio()
    if costs.draft and c is not None:
        lines.append(f"draft decode {c * t1 * 1e3:.1f} ms a draft position (c = {c:.2f} of a plain step, n={len(costs.draft)})")
    for source, samples in sorted(costs.drafts_by.items()):  # the MTP head's, apart from the draft model's
        c = costs.draft_ratio(source)
        if samples and c is not None:
            lines.append(f"{source} decode {c * t1 * 1e3:.1f} ms a draft position (c = {c:.2f} of a plain step, "
                         f"n={len(samples)})")
    return lines


def _auto_k(s: Summary) -> str:
    # auto's and suffix's drafts are cut after drafting, under a cap: what was sent is the length.
    if s.drafter in CUT_AFTER:
        return f"mean drafted {s.drafted / s.steps if s.steps else 0.0:.2f} a step"
    return f"mean chosen {s.mean_k:.2f}"


def calibration_text(bins: list) -> str:
    """The suffix drafter's confidence calibration, bins with evidence only: raw confidence range ->
    the acceptance it now predicts / the acceptance observed (proposed tokens judged: by verification
    when sent, else against the token the text went on with)."""
    rows = [r for r in bins if r.count]
    if not rows:
        return "suffix calibration: no proposals judged yet"
    parts = [f"{group_label(r.group)} "
             f"raw {r.low:.1f}-{r.high:.1f}: predicted {r.predicted:.2f} / observed {r.observed:.2f} (n={r.count})"
             for r in rows]
    return "suffix calibration (predicted / observed acceptance of proposed tokens, sent or not):\n  " + "\n  ".join(parts)


def summary_json(s: Summary, session, config: GenerationConfig) -> dict:
    """The same facts as format_summary, as plain JSON values for `run --json` (times in seconds)."""
    info = session.describe()
    ratio = vs_plain(s, session.costs) if s.drafter != "none" else None
    note = session.drafter_note(s)
    return {
        "finish_reason": s.finish_reason,
        "target": info.target.file,
        "draft": info.draft.file if info.draft else None,
        "drafter": s.drafter,
        "k": config.k if s.drafter != "none" else 0,
        "temperature": config.sampling.temperature,
        "seed": config.sampling.seed,
        "headline": headline(s, session.costs),
        "load_s": info.load_s,
        "vs_plain": ratio[0] if ratio else None,
        "drafter_note": note.text if note else None,
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
