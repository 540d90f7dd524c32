"""The llama.cpp adapter against real GGUF files: tiny generated models, and the Qwen vocabulary."""

from __future__ import annotations

import numpy as np
import pytest

from specllama.errors import ContextOverflowError, ModelFileError
from specllama.llama.context import DecodeContext, DecodePart
from specllama.llama.model import GGUFModel, StreamDecoder
from tests.support.tiny_gguf import write_not_gguf, write_truncated_copy


@pytest.fixture(scope="module")
def tiny(tiny_models):
    model = GGUFModel(tiny_models["a"])
    yield model
    model.close()


def fresh_logits(model: GGUFModel, tokens: list[int]) -> np.ndarray:
    ctx = DecodeContext(model, n_ctx=256, n_threads=1)
    try:
        return ctx.decode(tokens, logits="last")[0]
    finally:
        ctx.close()


def test_rollback_then_redecode_matches_a_fresh_decode(tiny):
    prefix = tiny.tokenize("def add(a, b):\n    return", add_special=False)
    ctx = DecodeContext(tiny, n_ctx=256, n_threads=1)
    ctx.decode(prefix + tiny.tokenize(" a - b  # wrong, rolled back", add_special=False), logits="none")
    ctx.rollback(len(prefix))
    assert ctx.n_past == len(prefix)
    continuation = tiny.tokenize(" a + b", add_special=False)
    after_rollback = ctx.decode(continuation, logits="last")[0]
    expected = fresh_logits(tiny, prefix + continuation)
    # Different batch splits use different kernels; agreement is to rounding, not bit-exact.
    np.testing.assert_allclose(after_rollback, expected, rtol=0, atol=1e-3 * np.abs(expected).max())
    assert int(np.argmax(after_rollback)) == int(np.argmax(expected))
    ctx.close()


def test_logits_only_where_asked(tiny):
    ctx = DecodeContext(tiny, n_ctx=128, n_threads=1)
    tokens = tiny.tokenize("one two three four", add_special=False)
    assert ctx.decode(tokens[:2], logits="none").shape == (0, tiny.n_vocab)
    rows = ctx.decode(tokens[2:], logits="all")
    assert rows.shape == (len(tokens) - 2, tiny.n_vocab)
    ctx.rollback(2)
    picked = ctx.decode(tokens[2:], logits=[0])
    np.testing.assert_allclose(picked[0], rows[0], atol=1e-3 * np.abs(rows[0]).max())
    ctx.close()


def test_logit_rows_are_copies_not_views_of_the_reused_buffer(tiny):
    ctx = DecodeContext(tiny, n_ctx=128, n_threads=1)
    first = ctx.decode(tiny.tokenize("alpha", add_special=False), logits="last")
    kept = first.copy()
    ctx.decode(tiny.tokenize(" beta gamma", add_special=False), logits="all")
    np.testing.assert_array_equal(first, kept)
    ctx.close()


def test_prompt_longer_than_context_is_a_clear_error(tiny):
    ctx = DecodeContext(tiny, n_ctx=32, n_threads=1)  # llama.cpp may round n_ctx up: use what it made
    ctx.decode(list(range(100, 110)), logits="none")
    with pytest.raises(ContextOverflowError, match="context full"):
        ctx.decode(list(range(100, 100 + ctx.n_ctx)), logits="last")
    assert ctx.n_past == 10  # nothing half-decoded
    ctx.close()


def test_reuse_prefix_keeps_the_common_part(tiny):
    ctx = DecodeContext(tiny, n_ctx=128, n_threads=1)
    a = tiny.tokenize("shared prefix then one ending", add_special=False)
    b = tiny.tokenize("shared prefix then another ending", add_special=False)
    ctx.decode(a, logits="none")
    kept = ctx.reuse_prefix(b)
    assert 0 < kept < len(a) and ctx.tokens == b[:kept]
    ctx.close()


@pytest.mark.parametrize("text", ["你好，世界！这是一个测试。", "emoji 🙂🚀👩‍💻 and naïve café", "ひらがな カタカナ 漢字"])
def test_stream_decoder_round_trips_multibyte_text(tiny, text):
    tokens = tiny.tokenize(text, add_special=False)
    decoder = StreamDecoder(tiny)
    pieces = [decoder.feed(t) for t in tokens] + [decoder.flush()]
    assert "".join(pieces) == text
    assert "\ufffd" not in "".join(pieces)


def test_byte_fallback_tokens_split_characters(tiny):
    # Why the decoder must be incremental: some tokens hold only part of a character's bytes.
    tokens = tiny.tokenize("🚀👩‍💻", add_special=False)
    partial = [t for t in tokens if _not_utf8(tiny.piece(t))]
    assert partial, "expected at least one token that is not valid UTF-8 on its own"


def _not_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True


def test_load_errors_are_clear(tmp_path, tiny_models):
    with pytest.raises(ModelFileError, match="no such file"):
        GGUFModel(tmp_path / "missing.gguf")
    with pytest.raises(ModelFileError, match="not a GGUF file"):
        GGUFModel(write_not_gguf(tmp_path / "notes.gguf"))
    with pytest.raises(ModelFileError, match="truncated"):
        GGUFModel(write_truncated_copy(tiny_models["a"], tmp_path / "half.gguf"))


def test_argmax_parts_return_each_rows_argmax_beside_whole_rows(tiny):
    # Greedy verification asks for ids only; the same decode may hold a sampling request's rows.
    ctx = DecodeContext(tiny, n_ctx=128, n_threads=1, n_seq_max=2)
    a = tiny.tokenize("def add(a, b):", add_special=False)
    b = tiny.tokenize("one two three", add_special=False)
    rows_a, rows_b = ctx.decode_parts([DecodePart(0, a, "all"), DecodePart(1, b, "all")])
    ctx.clear()
    ids_a, again_b = ctx.decode_parts([DecodePart(0, a, "argmax"), DecodePart(1, b, "all")])
    assert ids_a.shape == (len(a),) and ids_a.dtype.kind == "i"
    assert list(ids_a) == [int(np.argmax(r)) for r in rows_a]
    np.testing.assert_array_equal(again_b, rows_b)  # the same batch shape: the same rows
    assert ctx.held[0] == a and ctx.held[1] == b
    ctx.close()
