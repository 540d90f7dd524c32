"""Greedy rows' argmax taken by llama.cpp's backend sampler (llama/device_argmax.py, SPECLLAMA_BACKEND_ARGMAX):
on a real GGUF the ids are numpy's, a sequence switches between ids and rows as its requests need, and a
greedy generation writes the same text with it as without it."""

from __future__ import annotations

import numpy as np
import pytest

from specllama.decoding.engine import Engine, GenerationConfig, TokenEvent
from specllama.decoding.sampling import SamplingParams
from specllama.llama.context import DecodeContext, DecodePart
from specllama.llama.model import GGUFModel
from specllama.runtime.options import LoadOptions


@pytest.fixture(scope="module")
def model(tiny_models):
    m = GGUFModel(tiny_models["a"])
    yield m
    m.close()


def contexts(model, **kw):
    return DecodeContext(model, n_ctx=128, n_threads=1, n_seq_max=2, **kw), \
        DecodeContext(model, n_ctx=128, n_threads=1, n_seq_max=2, backend_argmax=True, **kw)


def test_the_backends_argmax_is_numpys_row_by_row(model):
    host, device = contexts(model)
    try:
        prompt = [5, 17, 300, 42, 9, 1000, 7]
        for ctx in (host, device):
            ctx.decode(prompt, logits="none")
        draft = [11, 12, 13, 14, 15]
        want = host.decode_parts([DecodePart(0, draft, "all")])[0].argmax(axis=1)
        got = device.decode_parts([DecodePart(0, draft, "argmax")])[0]
        assert device._device_argmax.attached == {0}  # taken on the backend, not from rows
        assert list(got) == list(want)
    finally:
        host.close()
        device.close()


def test_a_sequence_switches_between_ids_and_rows_and_batches_mix_them(model):
    host, device = contexts(model)
    try:
        for ctx in (host, device):
            ctx.decode([5, 6, 7], logits="none", seq=0)
            ctx.decode([8, 9, 10], logits="none", seq=1)
        # seq 0 asks for ids, seq 1 for rows (a sampled request beside a greedy one), in one decode
        h0, h1 = host.decode_parts([DecodePart(0, [20, 21], "all"), DecodePart(1, [30, 31], "all")])
        d0, d1 = device.decode_parts([DecodePart(0, [20, 21], "argmax"), DecodePart(1, [30, 31], "all")])
        assert list(d0) == list(h0.argmax(axis=1)) and np.array_equal(d1, h1)
        assert device._device_argmax.attached == {0}
        # then seq 0's next request samples: its rows come back again
        h = host.decode_parts([DecodePart(0, [22], "all")])[0]
        d = device.decode_parts([DecodePart(0, [22], "all")])[0]
        assert np.array_equal(d, h) and device._device_argmax.attached == set()
        assert list(device.decode_parts([DecodePart(0, [23], "argmax")])[0]) == \
            list(host.decode_parts([DecodePart(0, [23], "all")])[0].argmax(axis=1))
    finally:
        host.close()
        device.close()


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_a_generation_writes_the_same_text_with_it(model, temperature):
    texts = []
    for backend_argmax in (False, True):
        ctx = DecodeContext(model, n_ctx=256, n_threads=1, backend_argmax=backend_argmax)
        try:
            config = GenerationConfig(max_tokens=24, drafter="none", k=0,
                                      sampling=SamplingParams(temperature=temperature, seed=3))
            texts.append([e.id for e in Engine(ctx).generate([5, 17, 300, 42], config) if isinstance(e, TokenEvent)])
        finally:
            ctx.close()
    assert texts[0] == texts[1] and len(texts[0]) == 24


def test_the_switch_is_off_unless_asked(monkeypatch):
    monkeypatch.delenv("SPECLLAMA_BACKEND_ARGMAX", raising=False)
    assert LoadOptions().backend_argmax is False
    monkeypatch.setenv("SPECLLAMA_BACKEND_ARGMAX", "1")
    assert LoadOptions().backend_argmax is True
