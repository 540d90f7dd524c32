"""Human-readable summaries of a generation, shared by run, batch and chat."""

from __future__ import annotations

from specllama.decoding.engine import GenerationConfig, Summary
from specllama.decoding.runtime import Runtime


def format_summary(s: Summary, runtime: Runtime, config: GenerationConfig) -> str:
    lines = [
        runtime.describe(config),
        f"drafter {s.drafter}, k {config.k if s.drafter != 'none' else 0}"
        + (f" (mean chosen {s.mean_k:.2f})" if config.k == "auto" and s.drafter != "none" else "") + ", "
        + ("greedy" if config.sampling.greedy else f"temp {config.sampling.temperature}"),
        f"prompt {s.prompt_tokens} tokens ({s.reused_tokens} reused from cache) in {s.t_prompt:.2f} s",
        f"generated {s.tokens} tokens in {s.t_generate:.2f} s: {s.tokens_per_s:.2f} tokens/s "
        f"(finish: {s.finish_reason})",
    ]
    if s.drafted:
        per_pos = " ".join(f"{p:.2f}" for p in s.per_position)
        lines.append(f"acceptance {s.acceptance:.1%} ({s.accepted}/{s.drafted}), mean accepted length "
                     f"{s.mean_accepted:.2f} tokens/step over {s.steps} steps; per position: {per_pos}")
    total = s.t_draft + s.t_verify + s.t_python
    if total > 0:
        lines.append(f"time: draft {s.t_draft:.2f} s ({s.t_draft / total:.0%}), verify {s.t_verify:.2f} s "
                     f"({s.t_verify / total:.0%}), python {s.t_python * 1e3:.0f} ms ({s.t_python / total:.1%}); "
                     f"{s.t_python / max(s.steps, 1) * 1e3:.2f} ms python per step")
    return "\n".join(lines)
