"""The user's chat defaults: chat.toml in the config folder (specllama.dirs: ~/.config/specllama/ on Linux).

Written by the settings screen when asked ("save as my defaults"), read when `specllama chat`
starts; options given on the command line win over it. The theme picked in the command palette
(ctrl+p) is kept here too, as `theme`, whenever it changes. TOML is written by hand (the stdlib reads
TOML but does not write it); the values are a few numbers and strings.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from specllama.dirs import config_dir
from specllama.errors import SpecllamaError
from specllama.tui.settings import ChatSettings

HEADER = "# specllama chat defaults, written by the settings screen (ctrl+t). Command-line options win.\n"


class UserDefaultsError(SpecllamaError):
    """chat.toml cannot be read or does not hold valid settings."""


def config_path() -> Path:
    return config_dir() / "chat.toml"


def load(path: Path | None = None) -> dict:
    path = path or config_path()
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise UserDefaultsError(f"{path}: {e}") from None
    except UnicodeDecodeError as e:
        raise UserDefaultsError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); TOML files are UTF-8") from None


def apply(values: dict, base: ChatSettings, path: Path | None = None) -> ChatSettings:
    try:
        return ChatSettings.from_dict(values, base)
    except (SpecllamaError, TypeError) as e:
        raise UserDefaultsError(f"{path or config_path()}: {e}") from None


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def to_toml(values: dict) -> str:
    lines = [HEADER]
    for name, value in values.items():
        if value is not None:  # TOML has no null: an unset seed or system prompt is left out
            lines.append(f"{name} = {_toml_value(value)}\n")
    return "".join(lines)


def theme(values: dict) -> str | None:
    """The saved theme's name, if one is saved (checked against the installed themes by the app)."""
    name = values.get("theme")
    return name if isinstance(name, str) else None


def _write(values: dict, path: Path) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".toml.tmp")
        tmp.write_text(to_toml(values), encoding="utf-8")
        tmp.replace(path)  # never a half-written file
    except OSError as e:
        raise UserDefaultsError(f"could not save {path}: {e}") from None
    return path


def save(settings: ChatSettings, path: Path | None = None) -> Path:
    """The settings as the user's defaults; a saved theme stays."""
    path = path or config_path()
    kept = theme(load(path))
    return _write(settings.as_dict() | ({"theme": kept} if kept else {}), path)


def save_theme(name: str, path: Path | None = None) -> Path:
    """The theme, beside whatever settings are saved (a file that cannot be read is not overwritten)."""
    path = path or config_path()
    try:
        return _write(load(path) | {"theme": name}, path)
    except TypeError as e:  # a value written by hand that this writer cannot write back (a table)
        raise UserDefaultsError(f"{path}: {e}; the theme is not saved") from None
