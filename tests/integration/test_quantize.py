"""`models quantize`: llama.cpp's quantizer on a tiny model, registered in the user's models.toml."""

from __future__ import annotations

import pytest

from specllama.cli.main import main
from specllama.llama.context import DecodeContext
from specllama.llama.gguf_meta import check_compatibility, read_info
from specllama.llama.model import GGUFModel
from specllama.models.registry import load_registry


@pytest.fixture
def private_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECLLAMA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SPECLLAMA_CONFIG", str(tmp_path / "config" / "models.toml"))
    return tmp_path


def test_quantize_registers_a_working_compatible_model(private_dirs, tiny_models, capsys):
    assert main(["models", "quantize", str(tiny_models["a"]), "--type", "Q4_0", "--name", "tiny-q4"]) == 0
    assert "registered in" in capsys.readouterr().out
    spec = load_registry().model("tiny-q4")
    info = read_info(spec.path)
    assert info.quantization == "Q4_0" and info.file_size < tiny_models["a"].stat().st_size
    assert check_compatibility(spec.path, tiny_models["a"]).compatible
    model = GGUFModel(spec.path)
    ctx = DecodeContext(model, n_ctx=128, n_threads=1)
    assert ctx.decode(model.tokenize("hello world"), logits="last").shape == (1, model.n_vocab)
    ctx.close()
    assert list((private_dirs / "cache" / "models").glob(".*partial*")) == []


def test_quantize_refuses_a_taken_name_and_an_unknown_type(private_dirs, tiny_models, capsys):
    assert main(["models", "quantize", str(tiny_models["a"]), "--name", "qwen2.5-coder-0.5b"]) != 0
    assert "already registered" in capsys.readouterr().err
    assert main(["models", "quantize", str(tiny_models["a"]), "--type", "Q3_XYZ", "--name", "x"]) != 0
    assert "unknown quantization type" in capsys.readouterr().err
