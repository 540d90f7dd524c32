"""Loaded by Python at start-up when this folder is on PYTHONPATH (tests/integration/test_serve_decode_threads.py
puts it there for a `specllama serve` subprocess): the name of every thread that runs a llama.cpp decode is
written to $SPECLLAMA_DECODE_THREADS_LOG, once a thread, as it first decodes."""

import os

_log = os.environ.get("SPECLLAMA_DECODE_THREADS_LOG")
if _log:
    import threading

    from specllama.llama import decode_threads  # imports no llama.cpp: OpenMP's settings still apply

    _seen: set = set()
    _noted = decode_threads.noted

    def _noting() -> None:
        thread = threading.current_thread()
        if thread not in _seen:
            _seen.add(thread)
            with open(_log, "a") as f:
                f.write(thread.name + "\n")
        _noted()

    decode_threads.noted = _noting
