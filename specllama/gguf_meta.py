"""Read what a GGUF file says about itself, without loading it into llama.cpp.

This answers "what model is this, what tokenizer does it use, can it draft for that other model?"
in well under a second, even for multi-gigabyte files, by reading only the header (metadata
key/values and the tensor directory). Tensor data is never read.

Why not gguf.GGUFReader: it turns every element of every metadata array into its own numpy view,
so the 151,936 tokens plus 151,387 merges of a Qwen header take 3-6 seconds to open. The GGUF
header layout is small and stable, so we walk it here with struct (about 0.1 s for Qwen) and take
the enums and block sizes from the `gguf` package, so type ids and quant sizes stay in sync with it.

Every problem with a file (missing, a directory, not GGUF, truncated, corrupt) raises
ModelFileError with one line naming the file; no struct/Value/Index error escapes for a bad file.
"""

from __future__ import annotations

import mmap
import struct
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType, LlamaFileType

from specllama.errors import IncompatiblePairError, ModelFileError

GGUF_MAGIC = b"GGUF"
SUPPORTED_GGUF_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32  # GGUF spec; overridden by general.alignment

# llama.cpp common/speculative.cpp: the draft and target vocab sizes may differ by at most this
# many tokens, and token text is compared from this id on (ids 0-4 are often control tokens that
# legitimately differ between sizes of one family).
SPEC_VOCAB_MAX_SIZE_DIFFERENCE = 128
SPEC_VOCAB_CHECK_START_TOKEN_ID = 5

TOKENS_KEY = "tokenizer.ggml.tokens"

# (struct format char, byte size) of each fixed-size GGUF value type.
_SCALAR_FORMATS: dict[GGUFValueType, str] = {
    GGUFValueType.UINT8: "B",
    GGUFValueType.INT8: "b",
    GGUFValueType.UINT16: "H",
    GGUFValueType.INT16: "h",
    GGUFValueType.UINT32: "I",
    GGUFValueType.INT32: "i",
    GGUFValueType.FLOAT32: "f",
    GGUFValueType.BOOL: "?",
    GGUFValueType.UINT64: "Q",
    GGUFValueType.INT64: "q",
    GGUFValueType.FLOAT64: "d",
}

# general.file_type values that gguf.LlamaFileType no longer lists, but old files still carry.
_RETIRED_FILE_TYPES = {
    4: "Q4_1_SOME_F16",
    5: "Q4_2",
    6: "Q4_3",
    33: "Q4_0_4_4",
    34: "Q4_0_4_8",
    35: "Q4_0_8_8",
}


# --------------------------------------------------------------------------------------------
# Raw header
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetadataValue:
    """One metadata value with its GGUF type, so it can be written back unchanged."""

    value: Any  # int/float/bool/str, a list for arrays, or SkippedArray
    type: GGUFValueType
    sub_type: GGUFValueType | None = None  # element type when type is ARRAY


@dataclass(frozen=True)
class SkippedArray:
    """Stands in for an array the caller did not ask to decode; only its length is known."""

    length: int

    def __len__(self) -> int:
        return self.length


@dataclass(frozen=True)
class TensorEntry:
    """A tensor directory entry. shape is in ggml order (ne[0] first = the contiguous axis)."""

    name: str
    ggml_type: GGMLQuantizationType
    shape: tuple[int, ...]
    n_elements: int
    n_bytes: int
    offset: int  # relative to GGUFHeader.data_offset


@dataclass(frozen=True)
class GGUFHeader:
    path: Path
    version: int
    metadata: dict[str, MetadataValue]
    tensors: list[TensorEntry]
    data_offset: int  # absolute file offset where tensor data starts
    file_size: int

    def get(self, key: str, default: Any = None) -> Any:
        entry = self.metadata.get(key)
        return default if entry is None else entry.value


class _Overrun(Exception):
    """The header claims more bytes than the file has (truncated or corrupt)."""


class _Corrupt(Exception):
    """The header contains something no valid GGUF writer produces."""


class _HeaderParser:
    """Walks the header of an mmapped GGUF file. Reads only; keeps no views into the map."""

    def __init__(self, buf: mmap.mmap, byte_order: str, decode_array: Callable[[str], bool]):
        self.buf = buf
        self.size = len(buf)
        self.order = byte_order  # '<' or '>'
        self.decode_array = decode_array
        self.off = 0
        self.where = "the file header"  # what is being read, for error messages
        self._u64 = struct.Struct(byte_order + "Q")

    def _take(self, fmt: str) -> Any:
        s = struct.Struct(self.order + fmt)
        if self.off + s.size > self.size:
            raise _Overrun()
        (value,) = s.unpack_from(self.buf, self.off)
        self.off += s.size
        return value

    def _bytes(self, n: int) -> bytes:
        if self.off + n > self.size:
            raise _Overrun()
        data = self.buf[self.off : self.off + n]
        self.off += n
        return data

    def _string(self, *, strict: bool = True) -> str:
        raw = self._bytes(self._take("Q"))
        if not strict:
            # Values (templates, tokens) are bytes to llama.cpp; never reject what it would load.
            return raw.decode("utf-8", "surrogateescape")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            # Keys and tensor names are ASCII in every real file: bad UTF-8 means corruption.
            raise _Corrupt(f"invalid UTF-8 in {self.where}") from None

    def _check_count(self, count: int, min_item_size: int) -> None:
        # A corrupt count would otherwise make us build a huge list before hitting the end.
        if count * min_item_size > self.size - self.off:
            raise _Overrun()

    def _value_type(self, raw: int) -> GGUFValueType:
        try:
            return GGUFValueType(raw)
        except ValueError:
            raise _Corrupt(f"unknown value type {raw} in {self.where}") from None

    def parse(self) -> tuple[int, dict[str, MetadataValue], list[TensorEntry], int]:
        self.off = 4  # magic already checked
        version = self._take("I")
        n_tensors = self._take("Q")
        n_kv = self._take("Q")
        # Each key/value needs at least 13 bytes and each tensor entry at least 24: catches a
        # garbage count before we loop over it.
        if n_kv * 13 + n_tensors * 24 > self.size:
            raise _Overrun()

        metadata: dict[str, MetadataValue] = {}
        for i in range(n_kv):
            self.where = f"metadata entry #{i}"
            key = self._string()
            self.where = f"metadata key {key!r}"
            vtype = self._value_type(self._take("I"))
            metadata[key] = self._value(key, vtype)

        raw_tensors = []
        for i in range(n_tensors):
            self.where = f"tensor entry #{i}"
            name = self._string()
            self.where = f"tensor {name!r}"
            n_dims = self._take("I")
            if n_dims > 8:  # GGML_MAX_DIMS is 4; anything large is garbage
                raise _Corrupt(f"{self.where} has {n_dims} dimensions")
            shape = tuple(self._take("Q") for _ in range(n_dims))
            raw_type = self._take("I")
            offset = self._take("Q")
            raw_tensors.append((name, shape, raw_type, offset))

        alignment = metadata.get("general.alignment")
        align = DEFAULT_ALIGNMENT if alignment is None else alignment.value
        if not isinstance(align, int) or align <= 0 or align & (align - 1):
            raise _Corrupt(f"general.alignment is {align}, not a power of two")
        data_offset = -(-self.off // align) * align
        return version, metadata, [_tensor_entry(*t) for t in raw_tensors], data_offset

    def _value(self, key: str, vtype: GGUFValueType) -> MetadataValue:
        if vtype == GGUFValueType.ARRAY:
            sub_type = self._value_type(self._take("I"))
            count = self._take("Q")
            self._check_count(count, struct.calcsize(_SCALAR_FORMATS.get(sub_type, "Q")))
            if self.decode_array(key):
                items: Any = self._array(sub_type, count)
            else:
                self._skip_array(sub_type, count)
                items = SkippedArray(count)
            return MetadataValue(items, vtype, sub_type)
        if vtype == GGUFValueType.STRING:
            return MetadataValue(self._string(strict=False), vtype)
        return MetadataValue(self._take(_SCALAR_FORMATS[vtype]), vtype)

    def _array(self, sub_type: GGUFValueType, count: int) -> list[Any]:
        fmt = _SCALAR_FORMATS.get(sub_type)
        if fmt is not None:
            item = struct.Struct(self.order + fmt)
            raw = self._bytes(count * item.size)
            return [v for (v,) in item.iter_unpack(raw)]
        if sub_type == GGUFValueType.STRING:
            return self._string_array(count)
        # Nested arrays: legal GGUF, unused by llama.cpp; decode recursively.
        return [self._value("", sub_type).value for _ in range(count)]

    def _string_array(self, count: int) -> list[str]:
        # Hot loop (151k tokens): locals only, and no per-item bounds check: a length that runs
        # past the end makes the next unpack fail, and the final check catches the last one.
        buf, unpack, off = self.buf, self._u64.unpack_from, self.off
        raw = []
        append = raw.append
        try:
            for _ in range(count):
                (n,) = unpack(buf, off)
                off += 8
                append(buf[off : off + n])
                off += n
        except (struct.error, OverflowError):  # a garbage length pointed past the end
            raise _Overrun() from None
        if off > self.size:
            raise _Overrun()
        self.off = off
        # surrogateescape keeps any non-UTF-8 token bytes distinct and round-trippable, which
        # matters for token comparison (llama.cpp compares raw bytes with strcmp).
        return [b.decode("utf-8", "surrogateescape") for b in raw]

    def _skip_array(self, sub_type: GGUFValueType, count: int) -> None:
        fmt = _SCALAR_FORMATS.get(sub_type)
        if fmt is not None:
            end = self.off + count * struct.calcsize(fmt)
            if end > self.size:
                raise _Overrun()
            self.off = end
            return
        if sub_type == GGUFValueType.STRING:
            buf, unpack, off = self.buf, self._u64.unpack_from, self.off
            try:
                for _ in range(count):
                    off += 8 + unpack(buf, off)[0]
            except (struct.error, OverflowError):  # a garbage length pointed past the end
                raise _Overrun() from None
            if off > self.size:
                raise _Overrun()
            self.off = off
            return
        for _ in range(count):
            self._value("", sub_type)


def _tensor_entry(name: str, shape: tuple[int, ...], raw_type: int, offset: int) -> TensorEntry:
    try:
        ggml_type = GGMLQuantizationType(raw_type)
        block_size, type_size = GGML_QUANT_SIZES[ggml_type]
    except (ValueError, KeyError):
        raise _Corrupt(f"tensor {name!r} has unknown ggml type {raw_type}") from None
    n_elements = 1
    for dim in shape:
        n_elements *= dim
    if shape and shape[0] % block_size:
        raise _Corrupt(f"tensor {name!r} row of {shape[0]} is not a multiple of its block size")
    return TensorEntry(name, ggml_type, shape, n_elements, n_elements // block_size * type_size, offset)


def _open_checked(path: str | Path) -> tuple[Path, int]:
    """Resolve the common user mistakes to one-line errors before any parsing."""
    path = Path(path)
    if not path.exists():
        raise ModelFileError(f"{path}: no such file")
    if path.is_dir():
        raise ModelFileError(f"{path}: is a directory, not a GGUF file")
    try:
        with path.open("rb") as f:
            head = f.read(4)
    except OSError as e:
        raise ModelFileError(f"{path}: cannot read ({e.strerror or e})") from None
    if head != GGUF_MAGIC:
        # A text file, an HTML error page saved as .gguf, a safetensors file...: show what it is.
        raise ModelFileError(f"{path}: not a GGUF file (starts with {head!r})")
    return path, path.stat().st_size


def read_header(path: str | Path, *, decode_arrays: bool | Collection[str] = True) -> GGUFHeader:
    """Parse the whole header. decode_arrays: True for all arrays, or the keys to decode; other
    arrays are walked over and left as SkippedArray (their length is still known)."""
    path, file_size = _open_checked(path)
    if decode_arrays is True:
        wanted: Callable[[str], bool] = lambda key: True  # noqa: E731
    elif decode_arrays is False:
        wanted = lambda key: False  # noqa: E731
    else:
        keys = frozenset([decode_arrays] if isinstance(decode_arrays, str) else decode_arrays)
        wanted = keys.__contains__

    if file_size < 24:  # magic + version + two counts
        raise ModelFileError(f"{path}: truncated: only {file_size} bytes, shorter than a GGUF header")
    try:
        with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            (version,) = struct.unpack_from("<I", buf, 4)
            # A file written on a big-endian host has its version bytes swapped (llama.cpp's rule).
            byte_order = ">" if version & 0xFFFF == 0 else "<"
            version = struct.unpack_from(byte_order + "I", buf, 4)[0]
            if version not in SUPPORTED_GGUF_VERSIONS:
                raise ModelFileError(
                    f"{path}: unsupported GGUF version {version} (supported: "
                    f"{', '.join(map(str, SUPPORTED_GGUF_VERSIONS))})"
                )
            parser = _HeaderParser(buf, byte_order, wanted)
            try:
                version, metadata, tensors, data_offset = parser.parse()
            except _Overrun:
                raise ModelFileError(
                    f"{path}: truncated or corrupt: the file ends inside {parser.where} "
                    f"(file has {file_size} bytes)"
                ) from None
            except _Corrupt as e:
                raise ModelFileError(f"{path}: corrupt GGUF header: {e}") from None
    except OSError as e:
        raise ModelFileError(f"{path}: cannot read ({e.strerror or e})") from None

    # The header can be whole while the tensor data is cut short (an interrupted download).
    data_needed = max((t.offset + t.n_bytes for t in tensors), default=0)
    data_present = file_size - data_offset
    if data_needed > data_present:
        raise ModelFileError(
            f"{path}: truncated: header says {data_needed} bytes of tensor data, "
            f"file has {max(data_present, 0)}"
        )
    return GGUFHeader(path, version, metadata, tensors, data_offset, file_size)


# --------------------------------------------------------------------------------------------
# Model summary
# --------------------------------------------------------------------------------------------


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
