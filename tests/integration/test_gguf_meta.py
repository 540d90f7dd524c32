"""specllama.llama.gguf_meta: header summary, draft/target compatibility, and bad-file errors.

Most tests run on tiny random-weight models (tests/support/tiny_gguf.py) that borrow real tokenizers,
so they are fast yet see real vocabularies. A few read the headers of the real models (cheap:
header only), fetched through the model store.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter

from specllama.errors import IncompatiblePairError, ModelFileError
from specllama.llama.gguf_meta import (
    SPEC_VOCAB_CHECK_START_TOKEN_ID,
    check_compatibility,
    read_header,
    read_info,
    read_tokens,
    require_compatible,
)
from tests.conftest import TINY_B_SIZES
from tests.support.tiny_gguf import (
    tiny_model_param_count,
    write_not_gguf,
    write_truncated_copy,
)

# ---------------------------------------------------------------------------------------------
# read_info / read_tokens on tiny models
# ---------------------------------------------------------------------------------------------


def test_read_info_reports_the_values_written(tiny_models, tokenizer_sources):
    info = read_info(tiny_models["a"])
    source = read_info(tokenizer_sources["qwen"])

    assert info.path == tiny_models["a"]
    assert info.architecture == "llama"
    assert info.name == "tiny-llama-L2-E64-seed0"
    assert (info.n_layers, info.n_embd, info.n_head, info.n_head_kv) == (2, 64, 4, 2)
    assert info.context_length == 512
    assert info.quantization == "F16"
    assert info.n_tensors == 3 + 9 * 2
    assert info.n_params == tiny_model_param_count(source.vocab_size)
    assert info.file_size == tiny_models["a"].stat().st_size
    assert info.gguf_version == 3
    # The tokenizer is borrowed whole, so everything tokenizer-related matches the source.
    assert info.vocab_size == source.vocab_size > 100_000
    assert (info.vocab_type, info.pre_tokenizer) == (source.vocab_type, source.pre_tokenizer)
    assert (info.bos_id, info.eos_id, info.add_bos) == (source.bos_id, source.eos_id, source.add_bos)
    assert info.chat_template == source.chat_template and "im_start" in info.chat_template


def test_read_info_of_a_smaller_tiny_model(tiny_models):
    info = read_info(tiny_models["b"])
    assert (info.n_layers, info.n_embd, info.n_head, info.n_head_kv) == (1, 32, 2, 1)
    assert info.n_params == tiny_model_param_count(info.vocab_size, **TINY_B_SIZES)


def test_tokens_are_copied_exactly(tiny_models, tokenizer_sources):
    tokens = read_tokens(tiny_models["a"])
    assert tokens == read_tokens(tokenizer_sources["qwen"])
    assert len(tokens) == read_info(tiny_models["a"]).vocab_size


def test_summary_is_printable(tiny_models):
    text = read_info(tiny_models["a"]).summary()
    assert str(tiny_models["a"]) in text and "F16" in text and "gpt2" in text


@pytest.fixture(scope="session")
def all_types_gguf(tmp_path_factory) -> Path:
    """A small GGUF holding every metadata value type plus a float and a quantized tensor."""
    path = tmp_path_factory.mktemp("all_types") / "all_types.gguf"
    writer = GGUFWriter(path, "llama")
    writer.add_key_value("t.u8", 7, GGUFValueType.UINT8)
    writer.add_key_value("t.i8", -7, GGUFValueType.INT8)
    writer.add_key_value("t.u16", 65535, GGUFValueType.UINT16)
    writer.add_key_value("t.i16", -300, GGUFValueType.INT16)
    writer.add_key_value("t.u32", 4_000_000_000, GGUFValueType.UINT32)
    writer.add_key_value("t.i32", -2_000_000_000, GGUFValueType.INT32)
    writer.add_key_value("t.f32", 0.25, GGUFValueType.FLOAT32)
    writer.add_key_value("t.bool", True, GGUFValueType.BOOL)
    writer.add_key_value("t.u64", 2**63 + 5, GGUFValueType.UINT64)
    writer.add_key_value("t.i64", -(2**40), GGUFValueType.INT64)
    writer.add_key_value("t.f64", 1e-300, GGUFValueType.FLOAT64)
    writer.add_key_value("t.str", "héllo", GGUFValueType.STRING)
    writer.add_key_value("t.strs", ["a", "", "ü€"], GGUFValueType.ARRAY, GGUFValueType.STRING)
    writer.add_key_value("t.ints", [1, -2, 3], GGUFValueType.ARRAY, GGUFValueType.INT32)
    writer.add_key_value("t.floats", [0.5, -1.5], GGUFValueType.ARRAY, GGUFValueType.FLOAT32)
    writer.add_tensor("f32", np.ones((3, 5), dtype=np.float32))
    # A quantized tensor: raw bytes of 2 rows x 64 values of Q8_0 (34 bytes per 32 values).
    q8_bytes = np.zeros((2, 2 * 34), dtype=np.uint8)
    writer.add_tensor("q8", q8_bytes, raw_dtype=GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_header_parse_matches_gguf_reader(all_types_gguf):
    """Cross-check our header walker against the gguf package's reader on every value type."""
    path = all_types_gguf
    ours = read_header(path)
    reference = GGUFReader(path)
    for key, field in reference.fields.items():
        if key.startswith("GGUF."):  # the reader's virtual fields
            continue
        assert ours.metadata[key].type == field.types[0], key
        assert ours.metadata[key].value == field.contents(), key
    assert ours.data_offset == reference.data_offset
    assert [
        (t.name, t.shape, t.ggml_type, t.n_elements, t.n_bytes, t.offset + ours.data_offset)
        for t in ours.tensors
    ] == [
        (t.name, tuple(t.shape.tolist()), t.tensor_type, t.n_elements, t.n_bytes, t.data_offset)
        for t in reference.tensors
    ]


# ---------------------------------------------------------------------------------------------
# compatibility
# ---------------------------------------------------------------------------------------------


def test_models_sharing_a_tokenizer_are_compatible(tiny_models):
    report = check_compatibility(tiny_models["b"], tiny_models["a"])
    assert report.compatible, report.summary()
    assert report.reasons == []
    assert report.summary().startswith("compatible")
    assert require_compatible(tiny_models["b"], tiny_models["a"]).compatible


def test_different_tokenizers_are_incompatible_with_reasons(tiny_models):
    draft, target = tiny_models["a"], tiny_models["other"]
    report = check_compatibility(draft, target)
    assert not report.compatible

    n_draft, n_target = read_info(draft).vocab_size, read_info(target).vocab_size
    assert (
        f"vocab sizes differ by {abs(n_draft - n_target)} (max 128): "
        f"draft {n_draft}, target {n_target}"
    ) in report.reasons

    draft_tokens, target_tokens = read_tokens(draft), read_tokens(target)
    start = SPEC_VOCAB_CHECK_START_TOKEN_ID
    first_ids = [
        i for i in range(start, min(n_draft, n_target)) if draft_tokens[i] != target_tokens[i]
    ][:3]
    [text_reason] = [r for r in report.reasons if r.startswith("token text differs")]
    assert text_reason.startswith(f"token text differs from id {first_ids[0]} on")
    for i in first_ids:  # names the first few mismatching ids with both texts
        assert f"{i} ({draft_tokens[i]!r} vs {target_tokens[i]!r})" in text_reason

    summary = report.summary()
    assert summary.startswith("incompatible")
    assert all(reason in summary for reason in report.reasons)


def test_require_compatible_raises_one_line_error(tiny_models):
    with pytest.raises(IncompatiblePairError) as caught:
        require_compatible(tiny_models["other"], tiny_models["a"])
    message = str(caught.value)
    assert "\n" not in message
    assert str(tiny_models["other"]) in message and "vocab sizes differ" in message


# ---------------------------------------------------------------------------------------------
# bad files: one clear line naming the file, never a raw traceback
# ---------------------------------------------------------------------------------------------


def _model_file_error(path: Path) -> str:
    with pytest.raises(ModelFileError) as caught:
        read_info(path)
    message = str(caught.value)
    assert str(path) in message and "\n" not in message
    return message


def test_missing_file(tmp_path):
    assert "no such file" in _model_file_error(tmp_path / "nope.gguf")


def test_directory(tmp_path):
    assert "is a directory" in _model_file_error(tmp_path)


def test_text_file(tmp_path):
    path = write_not_gguf(tmp_path / "model.gguf", "hello, I am text\n")
    assert "not a GGUF file (starts with b'hell')" in _model_file_error(path)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.gguf"
    path.write_bytes(b"")
    assert "not a GGUF file (starts with b'')" in _model_file_error(path)


def test_truncated_tensor_data(tiny_models, tmp_path):
    path = write_truncated_copy(tiny_models["a"], tmp_path / "half.gguf", keep_fraction=0.5)
    header = read_header(tiny_models["a"])
    data_needed = max(t.offset + t.n_bytes for t in header.tensors)
    data_present = path.stat().st_size - header.data_offset
    message = _model_file_error(path)
    assert f"truncated: header says {data_needed} bytes of tensor data, file has {data_present}" in message


def test_truncated_header(tiny_models, tmp_path):
    # 1% of the file ends inside the token list, long before the tensor directory.
    path = write_truncated_copy(tiny_models["a"], tmp_path / "stub.gguf", keep_fraction=0.01)
    message = _model_file_error(path)
    assert "truncated" in message and "tokenizer.ggml.tokens" in message


def test_unsupported_version(tmp_path):
    path = tmp_path / "v9.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 9, 0, 0))
    assert "unsupported GGUF version 9" in _model_file_error(path)


def test_garbage_after_magic(tmp_path):
    # Valid magic and version, then a metadata count no file of this size could hold.
    path = tmp_path / "garbage.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 1, 2**40) + b"\xff" * 64)
    assert "truncated or corrupt" in _model_file_error(path)


def test_no_raw_exception_escapes_for_damaged_files(all_types_gguf, tmp_path):
    """Every prefix of a file, and random byte damage to it, either parses or raises
    ModelFileError; never a struct/Value/Index/OverflowError."""
    data = all_types_gguf.read_bytes()
    header = read_header(all_types_gguf)
    # The writer pads after the last tensor; cutting only padding leaves a complete model.
    data_end = header.data_offset + max(t.offset + t.n_bytes for t in header.tensors)
    damaged = tmp_path / "damaged.gguf"
    for length in range(data_end):
        damaged.write_bytes(data[:length])
        with pytest.raises(ModelFileError):
            read_header(damaged)

    rng = np.random.default_rng(0)
    for _ in range(300):
        corrupted = bytearray(data)
        for position in rng.integers(4, header.data_offset, size=3):  # keep the magic: test the parser
            corrupted[position] = rng.integers(256)
        damaged.write_bytes(bytes(corrupted))
        try:
            read_header(damaged)
        except ModelFileError:
            pass


def test_compatibility_check_reports_bad_file(tiny_models, tmp_path):
    with pytest.raises(ModelFileError, match="nope.gguf: no such file"):
        check_compatibility(tmp_path / "nope.gguf", tiny_models["a"])


# ---------------------------------------------------------------------------------------------
# real model headers (light: header only)
# ---------------------------------------------------------------------------------------------
