"""Loaded by Python at start-up when this folder is on PYTHONPATH (scripts/measure/serve_step_split.py puts it
there for a `specllama serve` or `run` subprocess): at the start of every llama.cpp decode, one line to
$SPECLLAMA_STEP_LOG: the clock, the context's seconds inside llama_decode so far, the batch's rows and the
context's id. Two lines in a row split the step between them into inside llama_decode and outside it."""

import os

_log = os.environ.get("SPECLLAMA_STEP_LOG")
if _log:
    import sys
    import time

    from specllama.llama import decode_threads  # imports no llama.cpp: OpenMP's settings still apply

    _out = open(_log, "a", buffering=1)
    _noted = decode_threads.noted

    def _noting() -> None:
        caller = sys._getframe(1).f_locals  # DecodeContext._submit's, right before its llama_decode
        context, tokens = caller.get("self"), caller.get("tokens")
        _out.write(f"{time.perf_counter():.6f} {getattr(context, 'llama_seconds', 0.0):.6f} "
                   f"{len(tokens) if tokens is not None else -1} {id(context)}\n")
        _noted()

    decode_threads.noted = _noting
