"""One benchmark from loaded models to the finished document: warm-up, interleaved runs, the
identical-output check, aggregation; predictions from what the runs' own steps cost. No argument
parsing or printing here (that is cli/cmd_bench.py), so tests and other tools can call it directly."""

from __future__ import annotations

from dataclasses import dataclass, field

from specllama.bench.aggregate import ConfigSummary, PromptResult, config_summaries, prompt_results
from specllama.bench.configs import BenchConfig
from specllama.bench.pairing import NEAR_TIE_LOGITS, judge_runs, judge_sampled
from specllama.bench.report import json_document
from specllama.bench.runner import WARMUP_TOKENS, BenchPrompt, BenchRunner, ProgressCallback
from specllama.bench.shared_text import shared_speeds
from specllama.decoding.cost.curve import CostCurve
from specllama.decoding.sampling import SamplingParams
from specllama.decoding.verifiers import VERIFIERS
from specllama.errors import SpecllamaError
from specllama.llama.machine import machine_info
from specllama.runtime.session import ModelInfo, Session


class BenchError(SpecllamaError):
    """The benchmark cannot produce meaningful numbers (e.g. the baseline itself failed)."""


@dataclass
class BenchOptions:
    max_tokens: int = 128
    repeat: int = 1
    sampling: SamplingParams = field(default_factory=SamplingParams)
    cost_curve_max_n: int = 16  # how far the reported curve (from the runs' steps) goes


@dataclass
class BenchOutcome:
    document: dict
    summaries: list[ConfigSummary]
    results: list[PromptResult]
    curve: CostCurve | None
    head_cost: float | None = None  # the target's MTP head's c, where this run timed its drafts
    switch: float | None = None  # what the plain steps after a draft cost beyond T(1) (StepCosts.aftermath_median)


def model_entry(model: ModelInfo | None) -> dict | None:
    if model is None:
        return None
    return {"name": model.name, "file": model.file, "path": str(model.path), "bytes": model.bytes,
            "architecture": model.architecture, "n_params": model.n_params, "quantization": model.quantization}


def run_benchmark(runtime: Session, prompts: list[BenchPrompt], configs: list[BenchConfig], options: BenchOptions,
                  *, progress: ProgressCallback | None = None, settings: dict | None = None) -> BenchOutcome:
    n_ctx = runtime.describe().n_ctx
    for p in prompts:
        if len(p.tokens) + 1 > n_ctx:
            raise BenchError(f"prompt {p.id!r} is {len(p.tokens)} tokens but the context holds {n_ctx} (raise --ctx)")

    runner = BenchRunner(runtime, prompts, configs, max_tokens=options.max_tokens, sampling=options.sampling,
                         repeat=options.repeat, progress=progress)
    runner.warm_up()
    runs = runner.run()
    # What the runs' steps cost (the engine's online estimate): the prediction each configuration's
    # measured speed is checked against.
    curve = runtime.costs.as_curve(options.cost_curve_max_n)
    head_cost = runtime.costs.draft_ratio("mtp") if runtime.costs.drafts_by.get("mtp") else None
    switch = runtime.costs.aftermath_median()
    if "none" in runner.failed or not any(r.config.is_baseline for r in runs):
        raise BenchError("plain decoding (the 'none' baseline) failed: " + runner.failed.get("none", "no runs"))

    by_id = {str(p.id): p.tokens for p in prompts}
    if options.sampling.greedy:
        if progress:
            progress(runner.total_runs, runner.total_runs, "checking outputs against none", None)
        verdicts = judge_runs(runtime, by_id, runs)
    elif options.sampling.seed is not None:
        verdicts = judge_sampled(runs)  # with a seed, a sampled run's text is plain's wherever the rows agree
    else:
        verdicts = [None] * len(runs)  # no seed: every run draws its own text

    config_rank = {c.label: i for i, c in enumerate(configs)}
    prompt_rank = {str(p.id): i for i, p in enumerate(prompts)}
    shared = shared_speeds(runs)
    results = sorted(prompt_results(runs, verdicts, shared),
                     key=lambda r: (config_rank[r.config], prompt_rank[str(r.prompt_id)]))
    # The prediction from steps prices every step as it happened: up to the longest batch any run sent (a
    # copy's drafts reach 63 tokens), where the curve printed stops at 16 rows and left it unpriced ("-").
    rows = max((VERIFIERS[r.config.verify].batch_tokens(len(r.summary.drafted_at)) for r in runs), default=1)
    priced = runtime.costs.as_curve(max(rows, options.cost_curve_max_n)) if curve is not None else None
    summaries = config_summaries(configs, runs, verdicts, results, priced, runner.failed, shared)

    settings = dict(settings or {})
    settings.update({
        "configs": [c.label for c in configs], "prompts": len(prompts), "max_tokens": options.max_tokens,
        "repeat": options.repeat, "warmup_tokens": WARMUP_TOKENS, "n_ctx": n_ctx,
        "sampling": {"temperature": options.sampling.temperature, "top_k": options.sampling.top_k,
                     "top_p": options.sampling.top_p, "min_p": options.sampling.min_p,
                     "seed": options.sampling.seed},
        "near_tie_tolerance_logits": NEAR_TIE_LOGITS,
    })
    info = runtime.describe()
    models = {"target": model_entry(info.target), "draft": model_entry(info.draft)}
    machine = machine_info(info.threads, info.threads_batch, placement=info.placement, gpu_layers=info.gpu_layers,
                           flash_attn=info.flash_attn)
    machine["draft_catch_up"] = runtime.draft_catch_up()  # after the runs: what the trial chose (catch_up.py)
    document = json_document(settings=settings, machine=machine, models=models, curve=curve,
                             results=results, summaries=summaries, switch=switch)
    return BenchOutcome(document, summaries, results, curve, head_cost, switch)


def bench_prompts(runtime: Session, items) -> list[BenchPrompt]:
    """Prompt file items -> chat-templated token lists for the target."""
    return [BenchPrompt(item.id, runtime.prompt_tokens(item.prompt, item.system)) for item in items]

