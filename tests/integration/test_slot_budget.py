"""--parallel's slots: auto allocates no more cache sequences than the job's prompts or half the
free memory can use, and the KV bytes a slot costs are what llama.cpp itself allocates."""

from __future__ import annotations

import re
from collections import deque

import pytest

from specllama.decoding.request import PARALLEL_AUTO_MAX
from specllama.errors import SpecllamaError
from specllama.llama import backend
from specllama.llama.context import DecodeContext
from specllama.llama.kv_memory import cells_per_sequence, kv_bytes_per_sequence, kv_bytes_per_token
from specllama.llama.model import GGUFModel
from specllama.runtime.slot_budget import MEMORY_SHARE, plan_slots
from tests.support.tiny_gguf import write_tiny_model

MB = 1_000_000


def test_auto_takes_one_slot_per_prompt_of_a_small_job():
    plan = plan_slots("auto", prompts=3, kv_bytes=117 * MB, available=20_000 * MB)
    assert (plan.count, plan.limit) == (3, "prompts")
    assert plan.describe() == "3 slot(s), one per prompt, 117 MB of cache each"


def test_auto_stays_within_its_share_of_the_free_memory():
    plan = plan_slots("auto", prompts=100, kv_bytes=117 * MB, available=1_000 * MB)
    assert plan.count == int(1_000 * MEMORY_SHARE // 117) == 4
    assert plan.limit == "memory"
    # Not even one slot fits: one still runs (the load itself then says what it could not allocate).
    assert plan_slots("auto", prompts=5, kv_bytes=117 * MB, available=10 * MB).count == 1


def test_auto_without_a_prompt_count_or_a_memory_figure_takes_the_most_it_considers():
    plan = plan_slots("auto", prompts=None, kv_bytes=117 * MB, available=None)
    assert (plan.count, plan.limit) == (PARALLEL_AUTO_MAX, "most")


def test_a_fixed_n_is_cut_to_the_prompts_but_not_to_the_memory():
    assert plan_slots(8, prompts=3, kv_bytes=MB, available=None).count == 3
    assert plan_slots(8, prompts=None, kv_bytes=117 * MB, available=100 * MB).count == 8  # the user asked for 8
    with pytest.raises(SpecllamaError, match="--parallel must be"):
        plan_slots(0, prompts=None, kv_bytes=MB, available=None)


@pytest.mark.parametrize("n_ctx, seqs", [(1000, 3), (512, 1)])
def test_kv_bytes_match_what_llama_cpp_allocates(tmp_path, tokenizer_sources, monkeypatch, n_ctx, seqs):
    """The estimate against llama.cpp's own log line for the context it made (cells rounded up to
    its block, every layer's K and V, f16)."""
    monkeypatch.setattr(backend, "_recent_log", deque(maxlen=5000))  # the whole log of this load
    path = write_tiny_model(tmp_path / "kv.gguf", tokenizer_sources["qwen"], n_layer=3, n_embd=64, n_head=4,
                            n_head_kv=2)
    assert kv_bytes_per_token(path) == 3 * 2 * (16 + 16) * 2
    model = GGUFModel(path)
    ctx = DecodeContext(model, n_ctx=n_ctx, n_seq_max=seqs)
    try:
        line = next(x for x in reversed(backend._recent_log) if x.startswith("llama_kv_cache: size ="))
        mib = float(re.search(r"size =\s*([\d.]+) MiB", line).group(1))
        logged = pytest.approx(mib * 2**20, abs=0.005 * 2**20)  # the log rounds to 0.01 MiB
        assert kv_bytes_per_sequence(path, n_ctx) * seqs == logged
        assert ctx.n_ctx == cells_per_sequence(n_ctx)  # the rounding the estimate assumes (1000 -> 1024)
    finally:
        ctx.close()
        model.close()


def logged_mib(prefix: str) -> float:
    line = next(x for x in reversed(backend._recent_log) if x.startswith(prefix))
    return float(re.search(r"size =\s*([\d.]+) MiB", line).group(1)) * 2**20


@pytest.mark.parametrize("arch, depth", [("qwen35", 6), ("lfm2", 6), ("mamba", 0), ("llama", 0)])
def test_a_recurrent_models_state_and_its_snapshots_are_what_llama_cpp_allocates(toy_models, monkeypatch, arch, depth):
    """A hybrid or recurrent model's slot holds its recurrent state 1 + n_rs_seq times (the
    snapshots its rollback uses, where the architecture has them): counted from the header as
    llama.cpp's own log line for the context it made says."""
    from specllama.llama.kv_memory import recurrent_state_bytes

    monkeypatch.setattr(backend, "_recent_log", deque(maxlen=5000))
    path = toy_models[arch]
    model = GGUFModel(path)
    ctx = DecodeContext(model, n_ctx=256, n_seq_max=2, snapshot_depth=depth)
    try:
        state = recurrent_state_bytes(path)
        if arch == "llama":
            assert state == 0 and not any(x.startswith("llama_memory_recurrent") for x in backend._recent_log)
            return
        assert state > 0
        logged = logged_mib("llama_memory_recurrent: size =")
        assert state * 2 * (1 + ctx.snapshot_depth) == pytest.approx(logged, abs=0.005 * 2**20)
        if arch != "mamba":
            assert ctx.snapshot_depth == depth  # an architecture with snapshots got them
    finally:
        ctx.close()
        model.close()


def test_a_hybrid_models_slot_costs_its_state_snapshots_and_checkpoints(toy_models, monkeypatch):
    """The slot plan of a hybrid model counts its cells, its state with its snapshots and kept
    checkpoints, and its MTP head's cells: more than the cells alone, as much as their sum."""
    from specllama.llama.kv_memory import mtp_kv_bytes_per_token, recurrent_state_bytes
    from specllama.llama.rollback import KEPT_CHECKPOINTS
    from specllama.runtime import LoadOptions, open_runtime

    monkeypatch.setattr(backend, "_recent_log", deque(maxlen=5000))
    path = toy_models["qwen35"]
    opts = LoadOptions(target=str(path), load_draft=False, load_mtp=True, n_ctx=256, exact=True, threads=1)
    with open_runtime(opts) as rt:
        cells = kv_bytes_per_sequence(path, 256, q8_0_cache=True)
        state = recurrent_state_bytes(path) * (1 + rt.target_ctx.snapshot_depth + KEPT_CHECKPOINTS + 1)
        head = mtp_kv_bytes_per_token(path) * cells_per_sequence(256)
        assert state > 0 and head > 0
        assert rt.slot_plan.kv_bytes == cells + state + head
        # The MTP context is made last: its cache is the last one llama.cpp logged.
        assert head * rt.slots == pytest.approx(logged_mib("llama_kv_cache: size ="), abs=0.005 * 2**20)
