"""Where specllama keeps its files, in each platform's usual place (through platformdirs):

- config (models.toml, chat.toml): ~/.config/specllama on Linux ($XDG_CONFIG_HOME honoured),
  ~/Library/Application Support/specllama on macOS, %LOCALAPPDATA%\\specllama on Windows;
  SPECLLAMA_CONFIG names the user's models.toml itself.
- cache (models, cost curves): ~/.cache/specllama, ~/Library/Caches/specllama,
  %LOCALAPPDATA%\\specllama\\Cache; SPECLLAMA_CACHE overrides. What each machine's decodes cost
  (costs/ in the cache) can be kept elsewhere with SPECLLAMA_COSTS: the tests do, so they neither
  read what earlier runs learnt on this machine nor leave their tiny models' costs there.
- prompt cache (`serve`'s kept prompt prefixes): prompt-cache/ in the cache; SPECLLAMA_PROMPT_CACHE
  overrides (the tests do: their servers must not leave entries in the user's cache).
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


def costs_dir() -> Path:
    if os.environ.get("SPECLLAMA_COSTS"):
        return Path(os.environ["SPECLLAMA_COSTS"])
    return cache_dir() / "costs"


def prompt_cache_dir() -> Path:
    if os.environ.get("SPECLLAMA_PROMPT_CACHE"):
        return Path(os.environ["SPECLLAMA_PROMPT_CACHE"])
    return cache_dir() / "prompt-cache"


def data_dir() -> Path:
    if os.environ.get("SPECLLAMA_DATA"):
        return Path(os.environ["SPECLLAMA_DATA"])
    return Path(platformdirs.user_data_dir(APP, appauthor=False))
