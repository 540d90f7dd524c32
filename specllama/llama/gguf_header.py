"""The raw GGUF header (metadata key/values and the tensor directory), read without loading the
model into llama.cpp and without reading tensor data.

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
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

from specllama.errors import ModelFileError

GGUF_MAGIC = b"GGUF"
SUPPORTED_GGUF_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32  # GGUF spec; overridden by general.alignment
# Arrays of arrays are legal GGUF, but no model nests them beyond a level or two (llama.cpp reads none).
MAX_ARRAY_DEPTH = 32

# Kept beside the format because they are facts about token ids every reader needs.
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
        self.depth = 0  # arrays of arrays being read

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
            self.depth += 1
            try:
                return self._array_value(key)
            finally:
                self.depth -= 1
        if vtype == GGUFValueType.STRING:
            return MetadataValue(self._string(strict=False), vtype)
        return MetadataValue(self._take(_SCALAR_FORMATS[vtype]), vtype)

    def _array_value(self, key: str) -> MetadataValue:
        if self.depth > MAX_ARRAY_DEPTH:  # nested arrays are read recursively: bound the recursion
            raise _Corrupt(f"{self.where} nests arrays more than {MAX_ARRAY_DEPTH} deep")
        sub_type = self._value_type(self._take("I"))
        count = self._take("Q")
        self._check_count(count, struct.calcsize(_SCALAR_FORMATS.get(sub_type, "Q")))
        if self.decode_array(key):
            items: Any = self._array(sub_type, count)
        else:
            self._skip_array(sub_type, count)
            items = SkippedArray(count)
        return MetadataValue(items, GGUFValueType.ARRAY, sub_type)

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
