"""The one declared interface between the front-ends (chat, run, batch, bench, costs, serve) and
loaded models: `Session`. `runtime.loaded.Runtime` is the real one; the chat's tests use a scripted
fake checked against this same protocol (tests/integration/test_session.py), and a test reads every
front-end's source to check it asks a session for nothing else.

Front-ends never see a model, a context or the engine: text goes in and out through the session's
tokenizer and chat template, requests through generate/run_many, and what was loaded comes back as
plain facts (`describe()`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Hashable, Iterable, Iterator, Protocol, Sequence

from specllama.decoding.cost.curve import CostCurve
from specllama.decoding.cost.online import StepCosts
from specllama.decoding.events import Event, Generation, Summary
from specllama.decoding.exactness import Comparison
from specllama.decoding.prepared import Prepared
from specllama.decoding.request import GenerationConfig
from specllama.decoding.request_queue import RequestQueue
from specllama.runtime.notices import Notice


@dataclass(frozen=True)
class ModelInfo:
    name: str  # the GGUF's own name (general.name), else the file's stem
    file: str
    path: Path
    bytes: int
    architecture: str | None
    n_params: int | None
    quantization: str | None
    n_vocab: int


@dataclass(frozen=True)
class SessionInfo:
    """What was loaded and how: for --stats, the benchmark's record, serve's /props, costs."""

    target: ModelInfo
    draft: ModelInfo | None
    placement: str  # "CPU", "GPU (all layers)", ...
    gpu_layers: int
    threads: int
    threads_batch: int
    n_ctx: int  # tokens one conversation (sequence) holds
    slots: int  # prompts decoded together at most
    exact: bool
    load_s: float  # seconds from asking to ready (a download included)
    flash_attn: str = "auto"  # the target context's attention: "on", "off", or "auto" (llama.cpp's choice)

    def line(self, config: GenerationConfig | None = None) -> str:
        """One line: models, placement, threads (the draft named only where the request may use it)."""
        from specllama.runtime.options import EXACT_MODE

        uses_draft = self.draft is not None and (config is None or (config.drafter in ("model", "auto") and config.drafts))
        draft = f", draft {self.draft.file}" if uses_draft else ""
        return f"target {self.target.file}{draft} on {self.placement}, threads {self.threads}" + (
            f", {EXACT_MODE}" if self.exact else "") + (", flash attention off" if self.flash_attn == "off" else "")


class Session(Protocol):
    # --- what was loaded (fixed for the session's life) -----------------------------------------
    target_name: str
    draft_name: str | None
    drafters: tuple[str, ...]  # what a request may name here, in the usual order
    threads: int

    def describe(self) -> SessionInfo: ...

    def notices(self) -> tuple[Notice, ...]: ...  # what loading had to say, in order

    def context_use(self) -> tuple[int, int]: ...  # (tokens held by the conversation, context size)

    # --- text: tokenizer and chat template --------------------------------------------------------
    def tokenize(self, text: str, stop=None) -> list[int]: ...  # raw text, no template; refused past the context

    def warm_tokenizer(self) -> None: ...  # read the special texts now (a server's start)

    def warm_up(self) -> None: ...  # a few decodes of each model now, caches emptied after (a server's start)

    def detokenize(self, tokens: Sequence[int]) -> str: ...

    def prompt_tokens(self, prompt: str, system: str | None = None) -> list[int]: ...  # one user turn, templated

    def chat_tokens(self, messages: list[dict], stop=None, tools=None, continue_last: bool = False,
                    bounded: bool = True, template_kwargs: dict | None = None) -> list[int]: ...
    # a conversation, templated (with OpenAI-style `tools`; `continue_last`: the last message is an
    # assistant prefill to continue); stop() abandons it

    def tool_call_format(self) -> str | None: ...  # the template's tool calls: None (no tools), a dialect's name, "other"

    def chat_dialect(self) -> tuple: ...  # (its dialect or None, whether thinking is parsed): dialects/

    def render_chat(self, messages: list[dict], tools=None, template_kwargs: dict | None = None) -> str: ...

    # --- generation ------------------------------------------------------------------------------
    def generate(self, prompt: Sequence[int], config: GenerationConfig, cancel=None) -> Generation: ...  # cancel: a CancelHandle

    def run_many(self, requests: Iterable | RequestQueue,
                 parallel: int | str | None = None) -> Iterator[tuple[Hashable, Event]]: ...

    def check(self, request) -> Prepared: ...  # refuse what cannot run before it is queued; else it prepared

    def interrupt(self) -> None: ...  # everything is stopping: a long prefill ends after its chunk

    def reset(self) -> None: ...  # empty every cache (the benchmark's cold start)

    @property
    def parallelism(self) -> int: ...  # prompts run_many decodes together now

    def parallelism_for(self, parallel: int | str) -> int: ...

    def parallel_reason(self) -> str: ...

    def judge(self, prompt: Sequence[int], reference: Sequence[int], candidate: Sequence[int]) -> Comparison: ...

    def top2_gap(self, tokens: Sequence[int]) -> float: ...  # the target's top-2 logit gap after `tokens`

    # --- what it costs here ------------------------------------------------------------------------
    @property
    def costs(self) -> StepCosts: ...  # learnt from every step so far

    def drafter_note(self, summary: Summary) -> Notice | None: ...  # a drafter asked for that is not paying

    def suffix_calibration(self) -> list: ...  # the suffix drafter's calibration bins (acceptance.CalibrationBin)

    def llama_decode_time(self) -> dict[str, tuple[int, float]]: ...

    def startup_curve(self, remeasure: bool = False, on_measure=None) -> CostCurve: ...

    def use_prompt_cache(self, ram_bytes: int, disk_bytes: int, folder, log=None): ...  # serve's (runtime/prompt_cache.py)

    def cost_cache_file(self) -> Path: ...

    def learned_costs(self) -> bool: ...

    def learned_head_cost(self) -> float | None: ...  # the MTP head's cost a draft position, learnt here

    def draft_catch_up(self) -> str | None: ...  # the draft model's catch-up and why (decoding/catch_up.py)

    def close(self) -> None: ...
