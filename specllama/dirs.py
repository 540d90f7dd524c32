"""Where specllama keeps its files, in each platform's usual place (through platformdirs):

- config (models.toml, chat.toml): ~/.config/specllama on Linux ($XDG_CONFIG_HOME honoured),
  ~/Library/Application Support/specllama on macOS, %LOCALAPPDATA%\\specllama on Windows;
  SPECLLAMA_CONFIG names the user's models.toml itself.
- cache (models, cost curves): ~/.cache/specllama, ~/Library/Caches/specllama,
  %LOCALAPPDATA%\\specllama\\Cache; SPECLLAMA_CACHE overrides.
- data (chat history): ~/.local/share/specllama, ~/Library/Application Support/specllama,
  %LOCALAPPDATA%\\specllama; SPECLLAMA_DATA overrides.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "specllama"


def config_dir() -> Path:
    return Path(platformdirs.user_config_dir(APP, appauthor=False))


def cache_dir() -> Path:
    if os.environ.get("SPECLLAMA_CACHE"):
        return Path(os.environ["SPECLLAMA_CACHE"])
    return Path(platformdirs.user_cache_dir(APP, appauthor=False))


def data_dir() -> Path:
    if os.environ.get("SPECLLAMA_DATA"):
        return Path(os.environ["SPECLLAMA_DATA"])
    return Path(platformdirs.user_data_dir(APP, appauthor=False))
