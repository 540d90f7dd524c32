"""One prompt-cache entry as a file: a header that names what it was made with, the tokens, and
llama.cpp's sequence states, with a checksum over all but the header.

    SPECLLAMA-PROMPT-CACHE\\n | u32 header length | header (JSON) | payload

The header says the model file (name, size, modification time), the cache type, the llama.cpp
version, and per part ("target", then "draft" if kept) its tokens, bytes and the layout it was
copied from (the cache's streams and the sequence), and the payload's CRC-32. So a file is never
trusted blindly: another model's, a truncated or a damaged one is refused with its reason
(EntryError) before llama.cpp reads a byte of it. llama.cpp's own state files
(llama_state_seq_save_file) carry neither the model nor a checksum: a foreign file would be
restored, and a damaged one would be read as cache cells.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAGIC = b"SPECLLAMA-PROMPT-CACHE\n"
VERSION = 1
SUFFIX = ".slpc"
MAX_HEADER = 1 << 20  # a header is a few hundred bytes: a larger length is a damaged file
TOKEN = np.dtype("<i4")


class EntryError(Exception):
    """Why a file cannot be used (one clause, for the server's log)."""


@dataclass
class Part:
    """One context's copy of one sequence: the tokens it held and llama.cpp's state of them."""

    tokens: np.ndarray  # int32
    data: bytearray
    n_stream: int  # the cache's streams when copied (llama.cpp writes them all: see prompt_cache.relayout)
    seq: int  # the sequence it was copied from

    @property
    def nbytes(self) -> int:
        return len(self.data) + self.tokens.nbytes


def write(path: Path, identity: dict, parts: dict[str, Part], draft_identity: dict | None) -> None:
    """Write atomically: a temporary file beside `path`, renamed over it once complete (a reader,
    or a restart after a crash, never sees half a file; a stale temporary is cleared by the scan).
    Not fsynced: a file cut by a power loss fails its checksum and is dropped."""
    crc = 0
    for part in parts.values():
        crc = zlib.crc32(part.tokens.astype(TOKEN, copy=False).tobytes(), crc)
        crc = zlib.crc32(part.data, crc)
    header = {"version": VERSION, **identity, "crc32": crc, "parts": [
        {"name": name, "n_tokens": len(p.tokens), "bytes": len(p.data), "n_stream": p.n_stream, "seq": p.seq,
         **({"model": draft_identity} if name == "draft" else {})} for name, p in parts.items()]}
    raw = json.dumps(header, sort_keys=True).encode()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(MAGIC + struct.pack("<I", len(raw)) + raw)
            for part in parts.values():
                f.write(part.tokens.astype(TOKEN, copy=False).tobytes())
                f.write(part.data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@dataclass
class Header:
    fields: dict
    start: int  # where the payload begins

    @property
    def parts(self) -> list[dict]:
        return self.fields["parts"]

    def size(self) -> int:
        return self.start + sum(p["n_tokens"] * TOKEN.itemsize + p["bytes"] for p in self.parts)


def read_header(path: Path, identity: dict) -> tuple[Header, np.ndarray]:
    """The header and the target's tokens (what the index needs), checked against `identity` and
    the file's size; EntryError says why not."""
    with open(path, "rb") as f:
        if f.read(len(MAGIC)) != MAGIC:
            raise EntryError("not a prompt-cache file")
        length = f.read(4)
        if len(length) < 4 or not 0 < (n := struct.unpack("<I", length)[0]) <= MAX_HEADER:
            raise EntryError("damaged header")
        try:
            fields = json.loads(f.read(n))
            header = Header(fields, len(MAGIC) + 4 + n)
            parts = header.parts
            valid = fields.get("version") == VERSION and parts and parts[0]["name"] == "target" and all(
                isinstance(p[k], int) and p[k] >= 0 for p in parts for k in ("n_tokens", "bytes", "n_stream", "seq"))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise EntryError("damaged header") from None
        if not valid:
            raise EntryError("damaged header")
        for key, value in identity.items():
            if fields.get(key) != value:
                raise EntryError(f"made for another {key.replace('_', ' ')} ({_short(fields.get(key))})")
        size = os.fstat(f.fileno()).st_size
        if size != header.size():
            raise EntryError(f"truncated ({size:,} bytes of {header.size():,})" if size < header.size()
                             else f"damaged ({size:,} bytes, its header says {header.size():,})")
        tokens = np.frombuffer(f.read(parts[0]["n_tokens"] * TOKEN.itemsize), dtype=TOKEN).astype(np.int32)
    return header, tokens


def read_parts(path: Path, identity: dict) -> tuple[dict[str, Part], dict | None]:
    """Every part of the file, its checksum verified; with the draft part's model identity."""
    header, _ = read_header(path, identity)
    parts: dict[str, Part] = {}
    crc = 0
    with open(path, "rb") as f:
        f.seek(header.start)
        for p in header.parts:
            raw = f.read(p["n_tokens"] * TOKEN.itemsize)
            data = bytearray(p["bytes"])
            if len(raw) != p["n_tokens"] * TOKEN.itemsize or f.readinto(data) != p["bytes"]:
                raise EntryError("truncated")
            crc = zlib.crc32(data, zlib.crc32(raw, crc))
            parts[p["name"]] = Part(np.frombuffer(raw, dtype=TOKEN).astype(np.int32), data, p["n_stream"], p["seq"])
    if crc != header.fields.get("crc32"):
        raise EntryError("damaged (checksum mismatch)")
    draft = next((p.get("model") for p in header.parts if p["name"] == "draft"), None)
    return parts, draft


def _short(value) -> str:
    if isinstance(value, dict) and "name" in value:
        return str(value["name"])
    return str(value)[:80]
