"""The registry's real GGUF files, read without generating: the target's header, the pair's
compatibility (and SmolLM2's refusal), the exact-batch limit, Qwen's long tokens, chat template and
end of generation. (Their tiny-model counterparts are in tests/integration/test_gguf_meta.py,
test_llama_ctx.py and test_exact_rows.py.)"""

from __future__ import annotations

import ctypes
import time

import llama_cpp as C
import pytest

from specllama.llama.exact_rows import EXACT_MAX_BATCH
from specllama.llama.gguf_meta import check_compatibility, read_info
from specllama.llama.model import GGUFModel

pytestmark = pytest.mark.real_models


@pytest.mark.real_models
def test_the_default_target_keeps_the_exact_batch(real_model_paths):
    assert GGUFModel(real_model_paths["qwen1.5b"], vocab_only=True).exact_max_batch == EXACT_MAX_BATCH


@pytest.mark.real_models
def test_real_qwen_target_header(real_model_paths):
    path = real_model_paths["qwen1.5b"]
    started = time.perf_counter()
    info = read_info(path)
    elapsed = time.perf_counter() - started
    assert info.architecture == "qwen2"
    assert info.vocab_size == 151936
    assert info.quantization == "Q4_K_M"
    assert info.chat_template and "<|im_start|>" in info.chat_template
    # ~0.03 s measured; gguf.GGUFReader takes 3-6 s on this header, which this guards against.
    assert elapsed < 2.0


@pytest.mark.real_models
def test_real_qwen_pair_is_compatible(real_model_paths):
    draft = real_model_paths["qwen0.5b"]
    target = real_model_paths["qwen1.5b"]
    report = check_compatibility(draft, target)
    assert report.compatible, report.summary()


@pytest.mark.real_models
def test_real_smollm_cannot_draft_for_qwen(real_model_paths):
    draft = real_model_paths["smollm2"]
    target = real_model_paths["qwen1.5b"]
    report = check_compatibility(draft, target)
    assert not report.compatible
    assert any(r.startswith("vocab sizes differ by 102784") for r in report.reasons)


def _gpt2_byte_decoder() -> dict[str, int]:
    # GPT-2's byte-level BPE stores bytes as printable code points; invert that map.
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    codes = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, codes)}


@pytest.mark.real_models
def test_every_long_qwen_token_detokenizes_in_full(real_model):
    model = GGUFModel(real_model("qwen2.5-coder-0.5b"), vocab_only=True)
    decode = _gpt2_byte_decoder()
    long_tokens = []
    for t in range(model.n_vocab):
        text = model.token_text(t)
        if all(ch in decode for ch in text):
            expected = bytes(decode[ch] for ch in text)
            if len(expected) > 32:
                long_tokens.append((t, expected))
    assert len(long_tokens) > 100  # the Qwen2 vocabulary has 240 tokens longer than 32 bytes
    for t, expected in long_tokens:
        assert model.piece(t) == expected, f"token {t}"
    # The trap we avoid: a 32-byte buffer (what llama-cpp-python's wrappers use) cannot hold them.
    t, expected = long_tokens[0]
    buf = ctypes.create_string_buffer(32)
    assert C.llama_token_to_piece(model._vocab, t, buf, 32, 0, False) == -len(expected)
    model.close()


@pytest.mark.real_models
def test_qwen_chat_template_and_end_of_generation(real_model):
    model = GGUFModel(real_model("qwen2.5-coder-0.5b"), vocab_only=True)
    text = model.render_chat([{"role": "user", "content": "hi"}])
    assert text.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    tokens = model.chat_tokens([{"role": "user", "content": "hi"}])
    im_start = model.tokenize("<|im_start|>", add_special=False)
    assert len(im_start) == 1 and im_start[0] in tokens  # special tokens parsed, not spelled out
    assert model.is_eog(model.tokenize("<|im_end|>", add_special=False)[0])
    assert model.is_eog(model.eos_id) and not model.is_eog(im_start[0])
    model.close()
