"""Where files go on each platform, and what a platform without POSIX `resource` (Windows) loses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from specllama import dirs
from specllama.models import registry, store
from specllama.tui import history, user_defaults

REPO = Path(__file__).resolve().parents[2]


def test_without_the_resource_module_the_machine_info_and_bench_line_still_work():
    """Windows has no `resource`: `run` and `bench` must not die on the import; the peak is unknown."""
    code = ("import sys; sys.modules['resource'] = None\n"
            "from specllama.llama import machine\n"
            "from specllama.bench.report import _machine_line\n"
            "assert machine.peak_rss_bytes() is None\n"
            "print(_machine_line(machine.machine_info(threads=1)))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "peak RSS not known here" in done.stdout


def test_folders_follow_the_platform_conventions_and_the_overrides(tmp_path, monkeypatch):
    for name in ("SPECLLAMA_CACHE", "SPECLLAMA_DATA", "SPECLLAMA_CONFIG", "SPECLLAMA_COSTS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    if sys.platform.startswith("linux"):  # platformdirs honours XDG there; macOS uses ~/Library
        assert registry.user_registry_path() == tmp_path / "cfg" / "specllama" / "models.toml"
        assert user_defaults.config_path() == tmp_path / "cfg" / "specllama" / "chat.toml"
        assert store.models_dir() == tmp_path / "cache" / "specllama" / "models"
        assert history.default_path() == tmp_path / "data" / "specllama" / "chats.sqlite3"
    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path / "c2"))
    monkeypatch.setenv("SPECLLAMA_DATA", str(tmp_path / "d2"))
    monkeypatch.setenv("SPECLLAMA_CONFIG", str(tmp_path / "mine.toml"))
    assert dirs.cache_dir() == tmp_path / "c2" and store.models_dir() == tmp_path / "c2" / "models"
    assert dirs.costs_dir() == tmp_path / "c2" / "costs"
    monkeypatch.setenv("SPECLLAMA_COSTS", str(tmp_path / "k"))
    assert dirs.costs_dir() == tmp_path / "k" and store.models_dir() == tmp_path / "c2" / "models"
    assert history.default_path() == tmp_path / "d2" / "chats.sqlite3"
    assert registry.user_registry_path() == tmp_path / "mine.toml"
