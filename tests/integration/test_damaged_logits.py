"""A model whose logits are not finite (a damaged file) is refused in one clear line, not decoded
into "!!!!!!!!" (argmax of NaN is token 0)."""

from __future__ import annotations

import pytest

from specllama.cli.main import main
from specllama.errors import ModelFileError
from specllama.llama.context import DecodeContext
from specllama.llama.model import GGUFModel
from tests.support.tiny_gguf import write_tiny_model


@pytest.fixture(scope="module")
def nan_model(tmp_path_factory, tokenizer_sources):
    return write_tiny_model(tmp_path_factory.mktemp("nan") / "nan.gguf", tokenizer_sources["qwen"], norm_value=float("nan"))


def test_non_finite_logits_raise_a_model_file_error(nan_model):
    model = GGUFModel(nan_model)
    ctx = DecodeContext(model, n_ctx=64, n_threads=1)
    try:
        with pytest.raises(ModelFileError, match="non-finite logits"):
            ctx.decode([1, 2, 3], logits="all")
    finally:
        ctx.close()
        model.close()


def test_run_says_so_in_one_line(nan_model, capsys):
    assert main(["run", "hi", "--target", str(nan_model), "--max-tokens", "3", "--ctx", "256"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "non-finite logits" in err[0] and "models verify" in err[0]
