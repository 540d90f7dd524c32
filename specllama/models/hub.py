"""Models on the Hugging Face hub, through huggingface_hub: its standard cache (HF_HOME,
HF_HUB_CACHE), its token (HF_TOKEN or `hf auth login`), resumed downloads, and HF_ENDPOINT for a
mirror (the tests' fake hub on 127.0.0.1).

A reference is `hf:OWNER/REPO:FILE_OR_QUANT`: a .gguf file name in the repository, or a quantization
tag such as Q4_K_M that picks the one .gguf file whose name carries it; `hf:OWNER/REPO` alone picks
the repository's only .gguf file. Nothing is downloaded unless the user named a hub model or asked
for a registered one with `--from-hub`.

huggingface_hub reads HF_ENDPOINT and the cache folder when it is imported; this module reads them at
each call and passes them on, so a changed environment is honoured.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from specllama.errors import DownloadError, UsageError

PREFIX = "hf:"
HEADER_READS = (8 << 20, 64 << 20)  # bytes of a file's start tried for its GGUF header, then more
SPLIT_PART = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")


@dataclass(frozen=True)
class HubRef:
    repo: str  # OWNER/REPO
    selector: str | None = None  # a file name, a quantization tag, or None: the only GGUF file
    revision: str = "main"

    def __str__(self) -> str:
        return PREFIX + self.repo + (f":{self.selector}" if self.selector else "")


def is_hub_ref(text: str) -> bool:
    return text.startswith(PREFIX)


def parse_ref(text: str) -> HubRef:
    body = text[len(PREFIX):]
    repo, _, selector = body.partition(":")
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise UsageError(f"{text!r}: a hub model is hf:OWNER/REPO or hf:OWNER/REPO:FILE_OR_QUANT "
                         "(e.g. hf:Qwen/Qwen2.5-Coder-7B-Instruct-GGUF:Q4_K_M)")
    return HubRef(repo, selector or None)


def _endpoint() -> str | None:
    return os.environ.get("HF_ENDPOINT") or None


def _cache_dir() -> str | None:
    """The standard hub cache as the environment names it now (None: huggingface_hub's default)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return str(Path(os.environ["HF_HOME"]) / "hub")
    return None


def _quiet() -> None:
    """huggingface_hub logs each retry ("'...' thrown while requesting GET ...", "Retrying in 1s
    [Retry 1/5].") as warnings on stderr, between our own lines (issue 41); the one line a failure
    ends with (_hub_error) says what went wrong. Called after the import, which sets its level."""
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)


def _hub_error(what: str, error: Exception) -> DownloadError:
    """huggingface_hub's and the network's exceptions as one line."""
    name = type(error).__name__
    status = getattr(getattr(error, "response", None), "status_code", None)
    if name == "RepositoryNotFoundError" or status == 401:
        why = "not found, or private (set HF_TOKEN or run `hf auth login`)"
    elif name in ("EntryNotFoundError", "RemoteEntryNotFoundError") or status == 404:
        why = "no such file in the repository"
    elif name == "RevisionNotFoundError":
        why = "no such revision"
    elif name in ("LocalEntryNotFoundError", "OfflineModeIsEnabled"):
        why = "the hub cannot be reached and the file is not in the cache"
    else:
        why = str(error).splitlines()[0] if str(error) else name
    return DownloadError(f"{what}: {why}")


def repo_files(ref: HubRef) -> list[str]:
    from huggingface_hub import HfApi

    _quiet()
    try:
        return HfApi(endpoint=_endpoint()).list_repo_files(ref.repo, revision=ref.revision)
    except Exception as e:  # huggingface_hub's errors and the network's: none is a bug of ours
        raise _hub_error(f"hub repository {ref.repo}", e) from None


def choose_file(ref: HubRef, files: list[str]) -> list[str]:
    """The file(s) a reference names: one .gguf file, or every part of a split model in order."""
    ggufs = sorted(f for f in files if f.lower().endswith(".gguf"))
    if ref.selector and ref.selector.lower().endswith(".gguf"):
        if ref.selector not in files:
            raise DownloadError(f"{ref}: the repository has no file {ref.selector}; its GGUF files: "
                                + (", ".join(ggufs) or "none"))
        matches = [ref.selector]
    elif ref.selector:
        tag = ref.selector.lower()
        matches = [f for f in ggufs if re.search(rf"(^|[^a-z0-9]){re.escape(tag)}([^a-z0-9]|$)", Path(f).name.lower())]
    else:
        matches = ggufs
    parts = {SPLIT_PART.sub("", f) for f in matches}
    if len(parts) == 1 and matches:
        return sorted(matches)  # one file, or the parts of one split model
    if not matches:
        what = f"no GGUF file matching {ref.selector!r}" if ref.selector else "no GGUF file"
        raise DownloadError(f"{ref}: {what}; its GGUF files: " + (", ".join(ggufs) or "none"))
    raise DownloadError(f"{ref}: {len(parts)} GGUF files match; name one: "
                        + ", ".join(f"{PREFIX}{ref.repo}:{Path(f).name}" for f in sorted(parts)))


def download(repo: str, filename: str, revision: str = "main") -> Path:
    """One file into the hub cache (resumed if a partial one is there), its path returned."""
    from huggingface_hub import hf_hub_download

    _quiet()
    try:
        return Path(hf_hub_download(repo, filename, revision=revision, cache_dir=_cache_dir(), endpoint=_endpoint()))
    except Exception as e:  # huggingface_hub's errors and the network's
        raise _hub_error(f"downloading {filename} from {repo}", e) from None


def cached(repo: str, filename: str, revision: str = "main") -> Path | None:
    """The file's path in the hub cache, or None; never touches the network."""
    from huggingface_hub import try_to_load_from_cache

    _quiet()
    found = try_to_load_from_cache(repo, filename, cache_dir=_cache_dir(), revision=revision)
    return Path(found) if isinstance(found, str) and Path(found).is_file() else None


def fetch(ref: HubRef, progress: Callable[[int, int | None, str], None] | None = None) -> Path:
    """The model a reference names, downloaded on first use (the parts of a split model all)."""
    files = choose_file(ref, repo_files(ref))
    paths = []
    for i, name in enumerate(files, start=1):
        if progress:
            progress(0, None, f"{ref.repo} {name}" + (f" (part {i}/{len(files)})" if len(files) > 1 else ""))
        paths.append(cached(ref.repo, name, ref.revision) or download(ref.repo, name, ref.revision))
    return paths[0]  # llama.cpp finds a split model's other parts beside the first


# --- a file's GGUF header without the whole file -------------------------------------------------------------


def header_copy(repo: str, filename: str, revision: str, into: Path) -> Path:
    """A sparse stand-in for a hub file: its first bytes (where a GGUF header lies) at the file's
    full size, so the header reader sees the real layout without downloading the weights. Reads
    8 MB, then 64 MB when the header is longer (large vocabularies)."""
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers

    _quiet()
    from specllama.errors import ModelFileError
    from specllama.llama.gguf_header import read_header

    url = hf_hub_url(repo, filename, revision=revision, endpoint=_endpoint())
    into.mkdir(parents=True, exist_ok=True)
    target = into / Path(filename).name
    for limit in HEADER_READS:
        request = urllib.request.Request(url, headers={**build_hf_headers(), "Range": f"bytes=0-{limit - 1}"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                total = _total_size(response)
                data = response.read(limit)
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise DownloadError(f"cannot read the header of {filename} from {repo}: {getattr(e, 'reason', e)}") from None
        with open(target, "wb") as f:
            f.write(data)
            f.truncate(max(total, len(data)))  # the rest is a hole: no disk used
        try:
            header = read_header(target, decode_arrays=False)
        except ModelFileError:
            header = None
        if header is not None and header.data_offset <= len(data):
            return target
        if len(data) >= total:
            break
    raise DownloadError(f"cannot read the GGUF header of {filename} from {repo} within {HEADER_READS[-1] >> 20} MB")


def _total_size(response) -> int:
    """The whole file's size from a ranged answer (Content-Range: bytes 0-N/TOTAL)."""
    content_range = response.headers.get("Content-Range") or ""
    if "/" in content_range and content_range.rsplit("/", 1)[1].isdigit():
        return int(content_range.rsplit("/", 1)[1])
    return int(response.headers.get("Content-Length") or 0)


def header_of(ref: HubRef, into: Path | None = None) -> Path:
    """A path the GGUF header can be read from: the cached file, else a sparse header copy."""
    files = choose_file(ref, repo_files(ref))
    found = cached(ref.repo, files[0], ref.revision)
    if found is not None:
        return found
    return header_copy(ref.repo, files[0], ref.revision, into or Path(tempfile.mkdtemp(prefix="specllama-header-")))
