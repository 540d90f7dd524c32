"""specllama's adapter for canitoolcall (a neutral conformance suite for tool-call and reasoning
parsers): its offline fixtures replayed through our serving layer.

What it drives is what `serve` runs: the OpenAI writer (server/api/openai_chat.py) with a Job carrying the
family's dialect (dialects/), fed TokenEvents and a DoneEvent exactly as exchange.py feeds it, and
its server-sent events read back and merged as an OpenAI client merges deltas; the non-streamed
parse is the writer's `whole()`. Each chunk of the stream is one TokenEvent holding the chunk's
text: one speculative step can emit several tokens, so every chunking strategy counts
(`tokens_per_step = "many"`), not only one token per delta.

Units (the contract's "token ids first"): the fixture's ids are of tokenizers this machine does not
hold (Qwen3, Gemma 4, Llama 3, ...), and its text cannot be re-tokenized by them either. So a
fixture's units are its text's own atoms: each of the family's markers (which are single special
tokens in every one of those vocabularies) is one unit, and every other character is one unit. A
token boundary is always a character boundary, so every split a tokenizer could make is among the
splits tried; `special` splits at the markers, `token` at every character, `rand:*` in random
groups of up to 8 characters. That is a harsher stream than any real one, never a kinder one.

The dialect comes from the family (a table below), as `serve` takes it from the GGUF's template
(the template-detection tests check those agree); the generation prompt says whether the answer
starts inside the thinking, as `serve` finds it from the rendered prompt.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Collection, Sequence
from typing import Any, ClassVar

from canitoolcall.adapters.base import Adapter, ReplayInput, Support, ToolSpec
from canitoolcall.fixtures import load_family
from canitoolcall.results import ParsedToolCall, ParseResult, StreamAccumulator

from specllama.decoding.events import DoneEvent, Summary, TokenEvent
from specllama.decoding.request import GenerationConfig
from specllama.dialects import BY_NAME
from specllama.server.api.openai_chat import Answer, OpenAIWriter
from specllama.server.schema import Job
from specllama.server.tools import ToolUse

FAMILIES = {"qwen3-hermes": "hermes", "qwen3-xml": "qwen3-xml", "gpt-oss": "harmony", "deepseek": "deepseek",
            "kimi": "kimi-k2", "glm": "glm", "llama": "llama3", "mistral": "mistral", "gemma4": "gemma4"}
UNSUPPORTED_MODELS = {"moonshotai/Kimi-K3": "Kimi K3's XTML format is not parsed (only Kimi K2's section tokens)"}


@functools.lru_cache(maxsize=None)
def family_markers(family: str) -> tuple[str, ...]:
    """The family's markers as its family.json lists them (special tokens of its vocabulary)."""
    return load_family(family).markers


class SpecllamaAdapter(Adapter):
    name: ClassVar[str] = "specllama"
    pinned_version: ClassVar[str] = "0.1.0"
    tokens_per_step: ClassVar[str] = "many"

    def __init__(self) -> None:
        self._units: dict[str, list[str]] = {}  # fixture id -> the text of each unit
        self._special: dict[str, set[int]] = {}

    def version(self) -> str:
        import specllama

        return getattr(specllama, "__version__", "dev")

    def supports(self, family: str, model: str) -> Support:
        if family not in FAMILIES:
            return Support(False, f"no dialect for the family {family}")
        if model in UNSUPPORTED_MODELS:
            return Support(False, UNSUPPORTED_MODELS[model])
        return Support(True)

    def parser_config(self, raw: ReplayInput) -> dict[str, Any]:
        return {"dialect": FAMILIES[raw.family], "starts_thinking": self._thinking(raw),
                "units": "markers and characters of raw_output", "tokens_per_step": "many"}

    # --- units -----------------------------------------------------------------------------------
    def units(self, raw: ReplayInput) -> list[int]:
        pieces, special = split_units(raw.text, self._markers(raw))
        self._units[raw.fixture_id] = pieces
        self._special[raw.fixture_id] = special
        return list(range(len(pieces)))

    def special_token_ids(self, raw: ReplayInput) -> Collection[int] | None:
        if raw.fixture_id not in self._units:
            self.units(raw)
        return self._special[raw.fixture_id]

    def _markers(self, raw: ReplayInput) -> tuple[str, ...]:
        dialect = BY_NAME[FAMILIES[raw.family]]
        found = set(dialect.markers) | set(family_markers(raw.family))
        found |= set(raw.stop_tokens)
        return tuple(sorted(found, key=len, reverse=True))

    # --- parses ------------------------------------------------------------------------------------
    def parse(self, raw: ReplayInput, tools: Sequence[ToolSpec]) -> ParseResult:
        writer = self._writer(raw, tools)
        out = writer.whole(self._summary(raw), [])
        message = out["choices"][0]["message"]
        calls = tuple(ParsedToolCall(c["function"]["name"], c["function"]["arguments"])
                      for c in message.get("tool_calls") or ())
        return ParseResult(content=message.get("content"), reasoning_content=message.get("reasoning_content"),
                           tool_calls=calls)

    def parse_stream(self, raw: ReplayInput, chunks: Sequence[Sequence[int]], tools: Sequence[ToolSpec]) -> ParseResult:
        pieces = self._units.get(raw.fixture_id) or split_units(raw.text, self._markers(raw))[0]
        return self._stream(raw, ["".join(pieces[i] for i in chunk) for chunk in chunks], tools)

    supports_text_deltas: ClassVar[bool] = True

    def parse_stream_text(self, raw: ReplayInput, deltas: Sequence[str], tools: Sequence[ToolSpec]) -> ParseResult:
        return self._stream(raw, list(deltas), tools)

    def _stream(self, raw: ReplayInput, texts: list[str], tools: Sequence[ToolSpec]) -> ParseResult:
        writer = self._writer(raw, tools)
        events = writer.opening()
        for text in texts[:-1] if texts else []:
            events += writer.token(TokenEvent(id=0, text=text, origin="draft"))
        events += writer.done(DoneEvent(texts[-1] if texts else "", self._summary(raw)))
        acc = StreamAccumulator()
        for event in events:
            data = event.removeprefix("data: ").strip()
            if data == "[DONE]":
                continue
            chunk = json.loads(data)
            if "error" in chunk:
                return acc.result(f"APIError: {chunk['error']}")
            for choice in chunk.get("choices") or ():
                acc.add_openai_delta(choice.get("delta") or {})
        return acc.result()

    # --- the serving layer's objects -----------------------------------------------------------
    def _thinking(self, raw: ReplayInput) -> bool:
        return BY_NAME[FAMILIES[raw.family]].starts_thinking(raw.generation_prompt or "")

    def _writer(self, raw: ReplayInput, tools: Sequence[ToolSpec]) -> OpenAIWriter:
        dialect = BY_NAME[FAMILIES[raw.family]]
        use = ToolUse(tuple(tools), "auto") if tools else None
        job = Job(prompt=[], config=GenerationConfig(), stream=True, include_usage=False, tools=use,
                  dialect=dialect, reasons=dialect.think is not None, thinking=self._thinking(raw))
        return OpenAIWriter(Answer(model="specllama", chat=True), job, lambda t: "")

    def _summary(self, raw: ReplayInput) -> Summary:
        return Summary(text=raw.text, finish_reason="length" if raw.truncated else "stop")


def split_units(text: str, markers: tuple[str, ...]) -> tuple[list[str], set[int]]:
    """`text` as units: each marker whole (longest first), every other character alone."""
    pieces: list[str] = []
    special: set[int] = set()
    i = 0
    while i < len(text):
        marker = next((m for m in markers if m and text.startswith(m, i)), None)
        if marker is not None:
            special.add(len(pieces))
            pieces.append(marker)
            i += len(marker)
        else:
            pieces.append(text[i])
            i += 1
    return pieces, special
