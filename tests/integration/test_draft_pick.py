"""`--target X --drafter model` alone: a cached, compatible draft from the registry, said on stderr."""

from __future__ import annotations

import json

from specllama.cli.main import main


def register(tmp_path, monkeypatch, entries: dict) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("SPECLLAMA_CONFIG", raising=False)
    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path / "cache"))  # the shipped models: not cached here
    user = tmp_path / "config" / "specllama" / "models.toml"
    user.parent.mkdir(parents=True)
    user.write_text("".join(f'[models."{name}"]\npath = "{path}"\nrole = "draft"\n' for name, path in entries.items()))


def test_the_smallest_cached_compatible_draft_is_picked_and_named(tiny_models, tmp_path, monkeypatch, capsys):
    # "other" is smaller but has another tokenizer: skipped; "b" shares the target's.
    register(tmp_path, monkeypatch, {"tiny-other": tiny_models["other"], "tiny-b": tiny_models["b"]})
    code = main(["run", "-m", str(tiny_models["a"]), "--drafter", "model", "-k", "2", "-n", "4", "-c", "256",
                 "--json", "hi"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "drafting with tiny-b" in err and "decoding plainly" not in err
    doc = json.loads(out)
    assert doc["draft"] == tiny_models["b"].name and doc["drafter"] == "model"


def test_without_a_fitting_draft_it_decodes_plainly_and_says_so(tiny_models, tmp_path, monkeypatch, capsys):
    register(tmp_path, monkeypatch, {"tiny-other": tiny_models["other"]})
    code = main(["run", "-m", str(tiny_models["a"]), "--drafter", "model", "-n", "2", "-c", "256", "--json", "hi"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "decoding plainly" in err and json.loads(out)["drafter"] == "none"
