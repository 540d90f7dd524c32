"""What a GGUF file says about itself, and whether a draft can serve a target.

Answers "what model is this, what tokenizer does it use, can it draft for that other model?" in
well under a second, even for multi-gigabyte files, from the header alone (gguf_header.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gguf import LlamaFileType

from specllama.errors import IncompatiblePairError, ModelFileError
from specllama.llama.gguf_header import (  # noqa: F401  (re-exported: tests and tools read headers through here)
    SPEC_VOCAB_CHECK_START_TOKEN_ID,
    SPEC_VOCAB_MAX_SIZE_DIFFERENCE,
    TOKENS_KEY,
    GGUFHeader,
    MetadataValue,
    SkippedArray,
    TensorEntry,
    read_header,
)

# general.file_type values that gguf.LlamaFileType no longer lists, but old files still carry.
_RETIRED_FILE_TYPES = {
    4: "Q4_1_SOME_F16",
    5: "Q4_2",
    6: "Q4_3",
    33: "Q4_0_4_4",
    34: "Q4_0_4_8",
    35: "Q4_0_8_8",
}


@dataclass(frozen=True)
class GGUFInfo:
    path: Path
    architecture: str
    name: str | None
    n_params: int
    quantization: str
    file_size: int
    vocab_type: str  # tokenizer.ggml.model: gpt2 (BPE), llama (SentencePiece), ...
    vocab_size: int
    bos_id: int | None
    eos_id: int | None
    add_bos: bool | None  # None when the file does not say (llama.cpp then uses a default)
    add_eos: bool | None
    context_length: int | None  # training context
    chat_template: str | None
    pre_tokenizer: str | None  # tokenizer.ggml.pre
    n_layers: int | None
    n_embd: int | None
    n_head: int | None
    n_head_kv: int | None
    n_tensors: int
    gguf_version: int

    def summary(self) -> str:
        size_mb = self.file_size / 1e6
        lines = [
            f"{self.path}",
            f"  model:        {self.name or '(unnamed)'} [{self.architecture}]",
            f"  parameters:   {_human_count(self.n_params)} ({self.quantization}, {size_mb:,.1f} MB)",
            f"  layers/embd:  {self.n_layers} x {self.n_embd}, heads {self.n_head} (kv {self.n_head_kv})",
            f"  context:      {self.context_length}",
            f"  vocab:        {self.vocab_size} tokens, {self.vocab_type}"
            + (f" / {self.pre_tokenizer}" if self.pre_tokenizer else ""),
            f"  bos/eos:      {self.bos_id} / {self.eos_id} (add_bos {self.add_bos})",
            f"  chat template: {'yes' if self.chat_template else 'no'}",
        ]
        return "\n".join(lines)


def _human_count(n: int) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f}{unit}"
    return str(n)


def _as_int(value: Any) -> int | None:
    # Some architectures store per-layer lists (e.g. head_count); the max is what a summary wants.
    if isinstance(value, list):
        value = max(value, default=None)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _as_bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _quantization(header: GGUFHeader) -> str:
    file_type = header.get("general.file_type")
    if isinstance(file_type, int) and not isinstance(file_type, bool):
        if file_type in _RETIRED_FILE_TYPES:
            return _RETIRED_FILE_TYPES[file_type]
        try:
            member = LlamaFileType(file_type)
        except ValueError:
            member = None
        if member is not None and member != LlamaFileType.GUESSED:
            return "F32" if member == LlamaFileType.ALL_F32 else member.name.removeprefix("MOSTLY_")
    # No (usable) file type: name the type holding most of the weights. Counting by elements,
    # not by tensors, so the many small F32 norm vectors do not win.
    by_elements: Counter[str] = Counter()
    for t in header.tensors:
        by_elements[t.ggml_type.name] += t.n_elements
    return by_elements.most_common(1)[0][0] if by_elements else "unknown"


def _info_from_header(header: GGUFHeader) -> GGUFInfo:
    arch = header.get("general.architecture")
    if not isinstance(arch, str):
        raise ModelFileError(f"{header.path}: GGUF header has no general.architecture")

    def arch_key(suffix: str) -> Any:
        return header.get(f"{arch}.{suffix}")

    tokens = header.get(TOKENS_KEY)
    chat_template = header.get("tokenizer.chat_template")
    name = header.get("general.name")
    return GGUFInfo(
        path=header.path,
        architecture=arch,
        name=name if isinstance(name, str) else None,
        n_params=sum(t.n_elements for t in header.tensors),
        quantization=_quantization(header),
        file_size=header.file_size,
        vocab_type=str(header.get("tokenizer.ggml.model", "none")),
        vocab_size=len(tokens) if tokens is not None else 0,
        bos_id=_as_int(header.get("tokenizer.ggml.bos_token_id")),
        eos_id=_as_int(header.get("tokenizer.ggml.eos_token_id")),
        add_bos=_as_bool(header.get("tokenizer.ggml.add_bos_token")),
        add_eos=_as_bool(header.get("tokenizer.ggml.add_eos_token")),
        context_length=_as_int(arch_key("context_length")),
        chat_template=chat_template if isinstance(chat_template, str) else None,
        pre_tokenizer=header.get("tokenizer.ggml.pre"),
        n_layers=_as_int(arch_key("block_count")),
        n_embd=_as_int(arch_key("embedding_length")),
        n_head=_as_int(arch_key("attention.head_count")),
        n_head_kv=_as_int(arch_key("attention.head_count_kv")),
        n_tensors=len(header.tensors),
        gguf_version=header.version,
    )


def read_info(path: str | Path) -> GGUFInfo:
    """Summary of a GGUF model from its header alone (no arrays decoded)."""
    return _info_from_header(read_header(path, decode_arrays=False))


def read_tokens(path: str | Path) -> list[str]:
    """tokenizer.ggml.tokens, index = token id. Empty if the file has no vocabulary."""
    tokens = read_header(path, decode_arrays=[TOKENS_KEY]).get(TOKENS_KEY)
    return list(tokens) if tokens is not None else []


# --------------------------------------------------------------------------------------------
# Draft/target compatibility
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompatReport:
    compatible: bool
    reasons: list[str]  # empty when compatible; each a short sentence
    draft: GGUFInfo | None = None
    target: GGUFInfo | None = None

    def summary(self) -> str:
        draft = self.draft.path if self.draft else "draft"
        target = self.target.path if self.target else "target"
        if self.compatible:
            lines = [f"compatible: {draft} can draft for {target}"]
            if self.draft and self.target:
                lines.append(
                    f"  shared vocabulary: {self.draft.vocab_type}, {self.draft.vocab_size} / "
                    f"{self.target.vocab_size} tokens, bos {self.target.bos_id}, eos {self.target.eos_id}"
                )
            return "\n".join(lines)
        lines = [f"incompatible: {draft} cannot draft for {target}"]
        lines += [f"  - {reason}" for reason in self.reasons]
        return "\n".join(lines)


def _read_info_and_tokens(path: str | Path) -> tuple[GGUFInfo, list[str]]:
    header = read_header(path, decode_arrays=[TOKENS_KEY])  # one pass for both
    tokens = header.get(TOKENS_KEY)
    return _info_from_header(header), (list(tokens) if tokens is not None else [])


def _short(token: str, limit: int = 24) -> str:
    text = repr(token)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def _token_text_reason(draft_tokens: list[str], target_tokens: list[str]) -> str | None:
    start = SPEC_VOCAB_CHECK_START_TOKEN_ID
    end = min(len(draft_tokens), len(target_tokens))
    if end <= start or draft_tokens[start:end] == target_tokens[start:end]:  # C-speed fast path
        return None
    mismatches = [
        i
        for i, (d, t) in enumerate(zip(draft_tokens[start:end], target_tokens[start:end]), start)
        if d != t
    ]
    shown = ", ".join(
        f"{i} ({_short(draft_tokens[i])} vs {_short(target_tokens[i])})" for i in mismatches[:3]
    )
    return (
        f"token text differs from id {mismatches[0]} on: {len(mismatches)} of {end - start} ids "
        f"from {start} differ (draft vs target), first mismatches at ids {shown}"
    )


def check_compatibility(draft_path: str | Path, target_path: str | Path) -> CompatReport:
    """Can the draft model speculate for the target? Follows llama.cpp's
    common_speculative_are_compatible, but collects every failing rule instead of the first.

    One deliberate difference: llama.cpp stores the vocab types in `bool` variables, so it
    only notices "no vocab" vs "some vocab"; we compare the actual type (gpt2 vs llama).
    Values missing from a header compare as None; llama.cpp would substitute per-vocab defaults.
    """
    draft, draft_tokens = _read_info_and_tokens(draft_path)
    target, target_tokens = _read_info_and_tokens(target_path)
    reasons: list[str] = []

    def differs(what: str, d: Any, t: Any) -> None:
        if d != t:
            reasons.append(f"{what} differs: draft {d!r}, target {t!r}")

    differs("vocab type", draft.vocab_type, target.vocab_type)
    differs("BOS token id", draft.bos_id, target.bos_id)
    differs("EOS token id", draft.eos_id, target.eos_id)
    differs("add_bos_token flag", draft.add_bos, target.add_bos)
    differs("add_eos_token flag", draft.add_eos, target.add_eos)

    size_diff = abs(draft.vocab_size - target.vocab_size)
    if size_diff > SPEC_VOCAB_MAX_SIZE_DIFFERENCE:
        reasons.append(
            f"vocab sizes differ by {size_diff} (max {SPEC_VOCAB_MAX_SIZE_DIFFERENCE}): "
            f"draft {draft.vocab_size}, target {target.vocab_size}"
        )
    text_reason = _token_text_reason(draft_tokens, target_tokens)
    if text_reason:
        reasons.append(text_reason)

    return CompatReport(not reasons, reasons, draft, target)


def require_compatible(draft_path: str | Path, target_path: str | Path) -> CompatReport:
    """check_compatibility, raising IncompatiblePairError (one line) when the pair cannot work."""
    report = check_compatibility(draft_path, target_path)
    if not report.compatible:
        raise IncompatiblePairError(
            f"{draft_path} cannot draft for {target_path}: " + "; ".join(report.reasons)
        )
    return report
