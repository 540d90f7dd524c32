"""llama/decode_threads.py: decodes counted per live thread; a passing thread's work and errors."""

import threading

import pytest

from specllama.llama import decode_threads


def on_thread(work) -> threading.Thread:
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    return thread


def test_decodes_are_counted_per_thread_and_a_finished_thread_is_forgotten():
    main = threading.current_thread()
    before = decode_threads.decodes_by_thread().get(main, 0)
    decode_threads.noted()
    decode_threads.noted()
    seen = {}

    def worker():
        decode_threads.noted()
        seen.update(decode_threads.decodes_by_thread())

    worker_thread = on_thread(worker)
    assert seen[worker_thread] == 1 and seen[main] == before + 2
    decode_threads.noted()  # from main again: the finished worker no longer counts
    now = decode_threads.decodes_by_thread()
    assert worker_thread not in now and now[main] == before + 3


def test_the_next_new_thread_drops_the_finished_ones_records():
    finished = on_thread(decode_threads.noted)
    on_thread(decode_threads.noted)  # a new thread: finished ones are pruned as it is recorded
    assert finished not in decode_threads._decodes


def test_work_on_a_passing_thread_returns_its_result_and_raises_its_error():
    names = []

    def work():
        names.append(threading.current_thread().name)
        return 42

    assert decode_threads.on_passing_thread(work, name="passing-test") == 42
    assert names == ["passing-test"]

    def fails():
        raise ValueError("from the passing thread")

    with pytest.raises(ValueError, match="from the passing thread"):
        decode_threads.on_passing_thread(fails)


def test_the_decoding_thread_is_one_thread_for_every_caller_and_raises_its_errors():
    ran_on = []

    def work():
        ran_on.append(threading.current_thread())
        return len(ran_on)

    first = decode_threads.on_decode_thread(work)
    on_thread(lambda: decode_threads.on_decode_thread(work))  # from another thread: the same decoding thread
    assert first == 1 and len(ran_on) == 2 and ran_on[0] is ran_on[1] and ran_on[0].name == "specllama-decode"

    def fails():
        raise RuntimeError("from the decoding thread")

    with pytest.raises(RuntimeError, match="from the decoding thread"):
        decode_threads.on_decode_thread(fails)
    assert decode_threads.on_decode_thread(work) == 3  # it lives on after an error
