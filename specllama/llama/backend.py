"""llama.cpp's process-wide state: backend start-up, its log, threads and build information.

Every module of this package goes through `ensure_backend()` before touching a model, so the log
callback is installed first and a failure can quote llama.cpp's own last words.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections import deque

from specllama.llama import thread_wait

# OpenMP reads how its threads wait when the library loads: a command chose its level before this
# import (cli/main.py); anything else gets the default (thread_wait.py says why and what it costs).
thread_wait.ensure_configured()

import llama_cpp as C  # noqa: E402

_init_lock = threading.Lock()
_backend_ready = False
_recent_log: deque[str] = deque(maxlen=20)


@C.llama_log_callback
def _log_to_ring(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    # llama.cpp talks a lot on stderr; keep the last lines so a failure can quote them instead.
    line = text.decode("utf-8", errors="replace").rstrip()
    if line:
        _recent_log.append(line)
    if os.environ.get("SPECLLAMA_VERBOSE"):
        print(line, file=sys.stderr)


def ensure_backend() -> None:
    global _backend_ready
    with _init_lock:
        if not _backend_ready:
            C.llama_log_set(_log_to_ring, ctypes.c_void_p(0))
            C.llama_backend_init()
            _backend_ready = True


def last_llama_error() -> str:
    errors = [line for line in _recent_log if "error" in line.lower() or "failed" in line.lower()]
    return (errors or list(_recent_log) or ["no details"])[-1]


def default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS
        return max(1, os.cpu_count() or 1)


def system_info() -> str:
    ensure_backend()
    return C.llama_print_system_info().decode(errors="replace").strip()


def library_version() -> str:
    return C.__version__




def gpu_offload_supported() -> bool:
    """Whether this llama.cpp build can put layers on a GPU (Metal, CUDA, ...)."""
    ensure_backend()
    return bool(C.llama_supports_gpu_offload())
