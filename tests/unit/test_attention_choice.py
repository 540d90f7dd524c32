"""What --flash-attn means for a context (llama/attention.py): off on a CPU for contexts of 8k and
more unless its score buffer would be too big, llama.cpp's own choice for short contexts and where
layers are offloaded, always on in exact mode."""

from __future__ import annotations

import pytest

from specllama.llama.attention import OFF_BUFFER_MAX, OFF_MIN_CTX, flash_attention, off_buffer_bytes


def choose(asked="auto", *, exact=False, offloaded=False, n_ctx=16384, n_head=12, n_ubatch=512, n_ctx_seq=None):
    return flash_attention(asked, exact=exact, offloaded=offloaded, n_ubatch=n_ubatch, n_ctx=n_ctx, n_head=n_head,
                           n_ctx_seq=n_ctx_seq)


def test_auto_is_off_on_a_cpu_for_deep_contexts_and_llama_cpps_own_choice_elsewhere():
    assert choose() == "off"
    assert choose(offloaded=True) == "auto"
    # Near an empty cache the kernel is a few percent faster on a CPU: a short context keeps it.
    assert choose(n_ctx=OFF_MIN_CTX - 1) == "auto" and choose(n_ctx=4096) == "auto"
    # Four sequences of 4096 share 16384 cells, but each fills to 4096 at most.
    assert choose(n_ctx=16384, n_ctx_seq=4096) == "auto"


def test_what_the_user_asks_is_kept_but_exact_mode_needs_it_on():
    assert choose("on") == "on" and choose("off", offloaded=True) == "off"
    assert choose("off", exact=True) == "on" and choose(exact=True) == "on"


def test_auto_keeps_it_on_where_the_scores_of_a_prompt_chunk_would_not_fit_the_budget():
    # The 1.5B (12 heads) at 32k context needs 768 MiB of scores: off. An 8B (32 heads) there: 2 GiB, on.
    assert off_buffer_bytes(512, 32768, 12) == 768 << 20 <= OFF_BUFFER_MAX
    assert choose(n_ctx=32768) == "off"
    assert choose(n_ctx=32768, n_head=32) == "on"


def test_an_unknown_choice_is_refused():
    with pytest.raises(ValueError, match="flash attention"):
        choose("maybe")
