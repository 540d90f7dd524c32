"""The prompt cache that outlives the slot (runtime/prompt_cache.py, issue 39 item 4), on tiny real
GGUFs: a prefix another request took the slot from comes back from memory, and from disk in a new
Runtime (after a restart), with a cold run's greedy text and fewer tokens prefilled; damaged,
truncated and foreign files are refused with a log line; the byte bound drops the least recently
used; two slots at once never get each other's prefix; a hybrid model restores whole entries only."""

from __future__ import annotations

import numpy as np
import pytest

from specllama.decoding.engine import GenerationConfig
from specllama.runtime import LoadOptions, Runtime, open_runtime
from specllama.runtime import prompt_cache_file as pcf
from tests.support.prompt_cache import GREEDY, MIN, OTHER, SYSTEM, run, tokens
from tests.support.tiny_gguf import write_tiny_model

DRAFTED = GenerationConfig(max_tokens=12, drafter="model", k=3)


@pytest.fixture(scope="module")
def long_model(tmp_path_factory, tokenizer_sources):
    """A tiny model trained (so to speak) for 4096 tokens: prompts of hundreds fit several slots."""
    return write_tiny_model(tmp_path_factory.mktemp("pc") / "long.gguf", tokenizer_sources["qwen"], seed=3, n_ctx=4096)


@pytest.fixture(scope="module")
def other_model(tmp_path_factory, tokenizer_sources):
    return write_tiny_model(tmp_path_factory.mktemp("pc") / "other.gguf", tokenizer_sources["qwen"], seed=4, n_ctx=4096)


def runtime(model, *, parallel=1, draft=None, ram=64 << 20, disk=0, folder=None, said=None) -> Runtime:
    rt = open_runtime(LoadOptions(target=str(model), draft=str(draft) if draft else None, load_draft=draft is not None,
                             n_ctx=2048, parallel=parallel, threads=1))
    rt.use_prompt_cache(ram, disk, folder, log=(said.append if said is not None else lambda text: None))
    rt.prompt_cache.min_tokens = MIN
    return rt


def cold(model, prompt, config=GREEDY, draft=None) -> list[int]:
    with open_runtime(LoadOptions(target=str(model), draft=str(draft) if draft else None, load_draft=draft is not None,
                             n_ctx=2048, parallel=1, threads=1)) as rt:
        return run(rt, [prompt], config)[0][0]


def test_a_prefix_another_request_took_the_slot_from_comes_back_from_memory(long_model):
    first, second = SYSTEM + tokens(3, 20), SYSTEM + tokens(4, 30)
    with runtime(long_model) as rt:
        run(rt, [first, OTHER + tokens(5, 10)])  # the second takes the one slot: the first is kept
        [(ids, summary)] = run(rt, [second])
        report = rt.prompt_cache_report()
    assert summary.reused_from == "memory" and summary.reused_tokens == len(SYSTEM)
    assert report["hits"]["memory"] == 1 and report["memory_entries"] >= 1
    assert ids == cold(long_model, second)


def test_the_draft_models_prefix_comes_back_with_the_targets(long_model):
    first, second = SYSTEM + tokens(3, 20), SYSTEM + tokens(6, 25)
    with runtime(long_model, draft=long_model) as rt:
        run(rt, [first, OTHER + tokens(5, 10)], DRAFTED)
        entry = next(iter(rt.prompt_cache.entries.values()))
        assert set(entry.parts) == {"target", "draft"}
        draft_before = rt.draft_ctx.llama_calls
        [(ids, summary)] = run(rt, [second], DRAFTED)
    assert summary.reused_from == "memory" and summary.reused_tokens == len(SYSTEM)
    assert ids == cold(long_model, second, DRAFTED, draft=long_model)
    # The draft model decoded the prompt's tail and its drafts, not the 400 tokens again.
    assert rt.draft_ctx.llama_calls - draft_before < 40


def test_an_entry_on_disk_serves_a_new_runtime_of_other_slots(long_model, tmp_path):
    """Written after a long prefill (no eviction needed) by a 2-slot runtime, restored by a 1-slot
    one: llama.cpp writes every stream of the cache, rewritten for the other count."""
    first, second = SYSTEM + tokens(3, 20), SYSTEM + tokens(7, 15)
    with runtime(long_model, parallel=2, ram=0, disk=64 << 20, folder=tmp_path) as rt:
        run(rt, [first])
    assert len(list(tmp_path.glob("*.slpc"))) == 1
    with runtime(long_model, ram=0, disk=64 << 20, folder=tmp_path) as rt:
        [(ids, summary)] = run(rt, [second])
        assert rt.prompt_cache_report()["hits"]["disk"] == 1
    assert summary.reused_from == "disk" and summary.reused_tokens == len(SYSTEM)
    assert ids == cold(long_model, second)


def damage(path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "damaged":
        data[-100] ^= 0xFF
    elif how == "truncated":
        data = data[:len(data) // 2]
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how, said_word", [("damaged", "checksum"), ("truncated", "truncated"),
                                            ("foreign", "another model")])
def test_a_damaged_truncated_or_foreign_file_is_refused_with_one_line(long_model, other_model, tmp_path, how, said_word):
    first, second = SYSTEM + tokens(3, 20), SYSTEM + tokens(8, 15)
    with runtime(long_model, ram=0, disk=64 << 20, folder=tmp_path) as rt:
        run(rt, [first])
    [ours] = tmp_path.glob("*.slpc")
    if how == "foreign":  # another model's entry under this model's name
        with runtime(other_model, ram=0, disk=64 << 20, folder=tmp_path / "other") as rt:
            run(rt, [first])
        [theirs] = (tmp_path / "other").glob("*.slpc")
        ours.write_bytes(theirs.read_bytes())
    else:
        damage(ours, how)
    said: list[str] = []
    with runtime(long_model, ram=0, disk=64 << 20, folder=tmp_path, said=said) as rt:
        [(ids, summary)] = run(rt, [second])
    assert summary.reused_from == "" and summary.reused_tokens == 0
    assert len([line for line in said if ours.name in line]) == 1 and said_word in said[0], said
    assert not ours.exists()  # removed: said once, not at every start
    assert ids == cold(long_model, second)


def test_the_memory_bound_drops_the_least_recently_used_entry(long_model):
    prefixes = [tokens(10 + i, 300) for i in range(3)]
    with runtime(long_model) as rt:
        run(rt, [prefixes[0] + [5]])
        one = rt.target_ctx.sequence_state(0)
        rt.prompt_cache.ram_bytes = int(2.5 * len(one))  # two entries fit, not three
        run(rt, [prefixes[1] + [5], prefixes[2] + [5]])  # each takes the slot: 0, then 1 kept
        run(rt, [prefixes[0] + [6]])  # 0 restored (used last), 2 kept: 1 is the least recently used
        kept = [e.tokens[:300].tolist() for e in rt.prompt_cache.entries.values()]
        report = rt.prompt_cache_report()
    assert prefixes[1] not in kept and prefixes[0] in kept and prefixes[2] in kept
    assert report["memory_entries"] == 2 and report["memory_bytes"] <= 2.5 * len(one)


def test_two_slots_at_once_never_restore_each_others_prefix(long_model):
    systems = [tokens(20 + i, 300) for i in range(4)]
    firsts = [s + tokens(30 + i, 10) for i, s in enumerate(systems)]
    seconds = [s + tokens(40 + i, 12) for i, s in enumerate(systems)]
    with runtime(long_model, parallel=2) as rt:
        run(rt, firsts, parallel=2)
        again = run(rt, seconds, parallel=2)
    for prompt, (ids, summary) in zip(seconds, again):
        assert summary.reused_tokens == 300 and summary.reused_from in ("memory", "")
        assert ids == cold(long_model, prompt)
    assert sum(s.reused_from == "memory" for _, s in again) >= 2  # two of the four were evicted from the slots


@pytest.mark.parametrize("arch", ["qwen35"])
def test_a_hybrid_model_restores_whole_entries_only(toy_models, arch):
    """A recurrent state is the state after an entry's last token: a prompt that shares only part
    of it is prefilled; one that starts with all of it (the conversation's next turn) restores it."""
    with open_runtime(LoadOptions(target=str(toy_models[arch]), load_draft=False, n_ctx=2048, parallel=1, threads=1)) as rt:
        rt.use_prompt_cache(64 << 20, 0, None, log=lambda text: None)
        rt.prompt_cache.min_tokens = MIN
        [(ids, _)] = run(rt, [SYSTEM])
        run(rt, [OTHER])
        partial = run(rt, [SYSTEM[:300] + tokens(9, 10)])[0][1]
        run(rt, [OTHER])
        turn = SYSTEM + ids + tokens(11, 10)
        [(turn_ids, whole)] = run(rt, [turn])
    assert partial.reused_from == "" and partial.reused_tokens == 0
    assert whole.reused_from == "memory" and whole.reused_tokens >= len(SYSTEM)
    with open_runtime(LoadOptions(target=str(toy_models[arch]), load_draft=False, n_ctx=2048, parallel=1, threads=1)) as rt:
        assert run(rt, [turn])[0][0] == turn_ids


def test_a_file_header_names_what_it_was_made_with(tmp_path):
    part = pcf.Part(np.arange(5, dtype=np.int32), bytearray(b"state"), 1, 0)
    path = tmp_path / "x.slpc"
    identity = {"model": {"name": "m.gguf", "size": 1, "mtime_ns": 2}, "cache_type": "f16", "llama_cpp": "0"}
    pcf.write(path, identity, {"target": part}, None)
    header, toks = pcf.read_header(path, identity)
    assert toks.tolist() == [0, 1, 2, 3, 4] and header.size() == path.stat().st_size
    with pytest.raises(pcf.EntryError, match="another cache type"):
        pcf.read_header(path, {**identity, "cache_type": "q8_0"})
    path.write_bytes(b"nonsense")
    with pytest.raises(pcf.EntryError, match="not a prompt-cache file"):
        pcf.read_header(path, identity)


def test_an_entry_llama_cpp_refuses_is_prefilled_instead(long_model):
    """A state llama.cpp will not read (here: its magic spoilt in memory) leaves the slot empty,
    not half restored: the prompt is prefilled, the answer is a cold run's, the log says so."""
    first, second = SYSTEM + tokens(3, 20), SYSTEM + tokens(12, 18)
    said: list[str] = []
    with runtime(long_model, said=said) as rt:
        run(rt, [first, OTHER + tokens(5, 10)])
        for entry in rt.prompt_cache.entries.values():
            entry.parts["target"].data[0] ^= 0xFF
        [(ids, summary)] = run(rt, [second])
    assert summary.reused_from == "" and summary.reused_tokens == 0
    assert any("could not be restored" in line for line in said), said
    assert ids == cold(long_model, second)


def test_a_folder_that_cannot_be_made_leaves_the_cache_in_memory(long_model, tmp_path):
    (tmp_path / "file").write_text("not a folder")
    said: list[str] = []
    with runtime(long_model, disk=64 << 20, folder=tmp_path / "file" / "cache", said=said) as rt:
        assert rt.prompt_cache.disk is None and rt.prompt_cache.enabled
    assert len(said) == 1 and "kept in memory only" in said[0]


def test_a_short_first_turn_comes_back_from_memory_and_stays_off_disk(long_model, tmp_path):
    """An agent's first turn of ~200 tokens, sent again after another conversation took the slot, is
    restored at the cache's own defaults (llama-server's RAM cache restores it; at the old 256-token
    minimum it was prefilled again, ~2 s on 2 cores); it is not written to disk, whose entries are
    for long prefixes after a restart (a write competes with decoding for the cores)."""
    first_turn = tokens(21, 200)
    with open_runtime(LoadOptions(target=str(long_model), load_draft=False, n_ctx=2048, parallel=1, threads=1)) as rt:
        rt.use_prompt_cache(64 << 20, 64 << 20, tmp_path, log=lambda text: None)
        run(rt, [first_turn, OTHER + tokens(5, 10)])  # another conversation takes the one slot
        [(ids, summary)] = run(rt, [first_turn])
        on_disk = [record.tokens.tolist() for record in rt.prompt_cache.disk.snapshot()]
    assert summary.reused_from == "memory" and summary.reused_tokens == len(first_turn) - 1
    assert on_disk and not any(tokens[:10] == first_turn[:10] for tokens in on_disk)  # the long one only
    assert ids == cold(long_model, first_turn)
