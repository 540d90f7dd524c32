"""models.toml -> frozen dataclasses.

The shipped registry is models.toml at the top of the repository; a wheel carries it as package
data (specllama/models/models.toml, put there by the build: _custom_build/build_backend.py), read through
importlib.resources so an installed wheel finds it wherever it lives; a checkout (an editable
install, or tests run from it) reads the top-level file itself. A user file in the config directory
(specllama.dirs) adds entries or replaces them whole by name. Every error names the file and the
key, because a typo in a TOML table is otherwise hard to find.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from importlib.resources import files as package_files
from importlib.resources.abc import Traversable
from pathlib import Path

from specllama.dirs import config_dir
from specllama.errors import ConfigError

# The wheel's copy first (pip, pipx, uv tool: the checkout's top is not there); a checkout has only the top's.
PACKAGED_REGISTRY: Traversable = package_files("specllama.models").joinpath("models.toml")
CHECKOUT_REGISTRY = Path(__file__).resolve().parents[2] / "models.toml"
SHIPPED_REGISTRY: Path | Traversable = PACKAGED_REGISTRY if PACKAGED_REGISTRY.is_file() else CHECKOUT_REGISTRY
ROLES = ("target", "draft", "any")


def user_registry_path() -> Path:
    return Path(os.environ.get("SPECLLAMA_CONFIG") or config_dir() / "models.toml")


@dataclass(frozen=True)
class RegistrySource:
    """A GGUF split into parts shipped inside packages on the package index."""

    package: str  # a format string: {i} is the 1-based part number, {i0} the 0-based one
    version: str
    parts: int
    member: str  # path of the part inside the wheel, same format rules
    size: int
    sha256: str

    def part(self, i: int) -> tuple[str, str]:
        """(requirement, member path) of part i, 1-based."""
        return f"{self.package.format(i=i, i0=i - 1)}=={self.version}", self.member.format(i=i, i0=i - 1)


@dataclass(frozen=True)
class HubSource:
    repo: str
    file: str
    revision: str = "main"
    size: int | None = None
    sha256: str | None = None


@dataclass(frozen=True)
class ModelSpec:
    name: str
    file: str  # the file name in the cache
    role: str = "any"
    description: str = ""
    path: Path | None = None  # a local file: used as is, never copied
    registry: RegistrySource | None = None
    hub: HubSource | None = None
    defined_in: Path | None = None

    @property
    def expected_size(self) -> int | None:
        return self.registry.size if self.registry else (self.hub.size if self.hub else None)


@dataclass(frozen=True)
class PairSpec:
    name: str
    target: str
    draft: str


@dataclass(frozen=True)
class Registry:
    models: dict[str, ModelSpec]
    pairs: dict[str, PairSpec]
    default_pair: str
    files: tuple[Path, ...]

    def model(self, name: str) -> ModelSpec:
        if name not in self.models:
            known = ", ".join(sorted(self.models)) or "(none)"
            raise ConfigError(f"unknown model '{name}'; known models: {known} (see `specllama models list`)")
        return self.models[name]

    def pair(self, name: str | None = None) -> PairSpec:
        name = name or self.default_pair
        if name not in self.pairs:
            known = ", ".join(sorted(self.pairs)) or "(none)"
            raise ConfigError(f"unknown pair '{name}'; known pairs: {known}")
        return self.pairs[name]


def _table(value: object, where: str) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table, got {type(value).__name__}")
    return value


# The TOML type each key must have; anything else is refused at load with the file and key, not
# met later as a traceback in `models pull` or `list`.
_STR, _INT, _PATH = "a string", "a whole number", "a path (string)"
_KEY_TYPES = {
    "ModelSpec": {"file": _STR, "role": _STR, "description": _STR, "path": _PATH},
    "RegistrySource": {"package": _STR, "version": _STR, "parts": _INT, "member": _STR, "size": _INT,
                       "sha256": _STR},
    "HubSource": {"repo": _STR, "file": _STR, "revision": _STR, "size": _INT, "sha256": _STR},
    "PairSpec": {"target": _STR, "draft": _STR},
}


def _check_types(cls, fields: dict, where: str) -> None:
    for key, expected in _KEY_TYPES.get(cls.__name__, {}).items():
        if key not in fields:
            continue
        value = fields[key]
        ok = isinstance(value, int) and not isinstance(value, bool) if expected == _INT else isinstance(value, str)
        if not ok:
            raise ConfigError(f"{where}.{key}: expected {expected}, got {type(value).__name__} {value!r}")
        if expected == _INT and value < 1:
            raise ConfigError(f"{where}.{key}: expected a whole number of at least 1, got {value}")
    if cls is RegistrySource:
        for key in ("package", "member"):
            if key in fields:
                _check_pattern(fields[key], f"{where}.{key}")


def _check_pattern(pattern: str, where: str) -> None:
    """A part-name pattern may use only {i} and {i0} (with a format spec such as {i:02d})."""
    try:
        pattern.format(i=1, i0=0)
    except (KeyError, IndexError):
        raise ConfigError(f"{where}: {pattern!r} uses an unknown placeholder; only {{i}} (the part number, "
                          "e.g. {i} or {i:02d}) and {i0} (counted from 0) are allowed") from None
    except ValueError as e:
        raise ConfigError(f"{where}: {pattern!r} is not a valid pattern ({e}); only {{i}} is allowed") from None


def _build(cls, fields: dict, where: str):
    if cls is not ModelSpec:  # a model's own keys are checked in _parse_model, before path becomes a Path
        _check_types(cls, fields, where)
    try:
        return cls(**fields)
    except TypeError as e:  # unknown or missing keys
        raise ConfigError(f"{where}: {e}".replace(f"{cls.__name__}.__init__() ", "")) from None


def _parse_model(name: str, raw: dict, file: Path) -> ModelSpec:
    where = f"{file}: [models.\"{name}\"]"
    fields = dict(_table(raw, where))
    if "registry" in fields:
        fields["registry"] = _build(RegistrySource, _table(fields["registry"], where + ".registry"), where + ".registry")
    if "hub" in fields:
        fields["hub"] = _build(HubSource, _table(fields["hub"], where + ".hub"), where + ".hub")
    _check_types(ModelSpec, fields, where)
    if "path" in fields:
        fields["path"] = Path(os.path.expanduser(fields["path"]))
        fields.setdefault("file", fields["path"].name)
    if fields.get("role", "any") not in ROLES:
        raise ConfigError(f"{where}.role: must be one of {', '.join(ROLES)}, got {fields['role']!r}")
    if not any(k in fields for k in ("path", "registry", "hub")):
        raise ConfigError(f"{where}: needs a source: path, registry or hub")
    if "file" not in fields:
        raise ConfigError(f"{where}: missing key 'file' (the file name in the cache)")
    _check_file_name(fields["file"], f"{where}.file")
    return _build(ModelSpec, {"name": name, "defined_in": file, **fields}, where)


def _check_file_name(name: str, where: str) -> None:
    """`file` names a file inside the cache: an absolute path or a `..` would make `pull` write, and
    `verify` read, anywhere on the disk."""
    if (not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name
            or Path(name).is_absolute() or Path(name).name != name):
        raise ConfigError(f"{where}: {name!r} must be a plain file name (it is stored in the model cache); "
                          "for a file elsewhere on disk use path = \"...\"")


def _read_toml(file: Path | Traversable) -> dict:
    try:
        with file.open("rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{file}: not valid TOML: {e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{file}: not UTF-8 text ({e.reason} at byte {e.start}); TOML files are UTF-8") from None
    except OSError as e:
        raise ConfigError(f"{file}: cannot read: {e.strerror}") from None


def _check_user_file(user: Path, *, named_by_env: bool) -> None:
    """The default user file may be absent; one the user named through SPECLLAMA_CONFIG must exist,
    or their entries would be silently ignored. A directory in its place is always a mistake."""
    if user.is_dir():
        raise ConfigError(f"{user} (the user registry{', from SPECLLAMA_CONFIG' if named_by_env else ''}) "
                          "is a directory, not a models.toml file")
    if named_by_env and not user.exists():
        raise ConfigError(f"SPECLLAMA_CONFIG names {user}, which does not exist; create it or unset SPECLLAMA_CONFIG")


def load_registry(shipped: Path | Traversable = SHIPPED_REGISTRY, user: Path | str | None = None, *,
                  user_may_be_missing: bool = False) -> Registry:
    """The shipped registry with the user's file layered on top (entries replaced whole by name).
    `user_may_be_missing`: the caller is about to create the user file (`models quantize`)."""
    if user is None:
        user = user_registry_path()
        _check_user_file(user, named_by_env="SPECLLAMA_CONFIG" in os.environ and not user_may_be_missing)
    else:
        user = Path(user)
        _check_user_file(user, named_by_env=False)
    models: dict[str, ModelSpec] = {}
    pairs: dict[str, PairSpec] = {}
    default_pair = ""
    files = [shipped] + ([user] if user.is_file() else [])
    for file in files:
        data = _read_toml(file)
        for name, raw in _table(data.get("models", {}), f"{file}: [models]").items():
            models[name] = _parse_model(name, raw, file)
        for name, raw in _table(data.get("pairs", {}), f"{file}: [pairs]").items():
            where = f"{file}: [pairs.\"{name}\"]"
            pairs[name] = _build(PairSpec, {"name": name, **_table(raw, where)}, where)
        default_pair = _table(data.get("defaults", {}), f"{file}: [defaults]").get("pair", default_pair)
        if not isinstance(default_pair, str):
            raise ConfigError(f"{file}: [defaults].pair: expected a string, got {type(default_pair).__name__}")
    for pair in pairs.values():
        for role in ("target", "draft"):
            if getattr(pair, role) not in models:
                raise ConfigError(f"pair '{pair.name}' names unknown {role} model '{getattr(pair, role)}'")
    return Registry(models, pairs, default_pair, tuple(files))
