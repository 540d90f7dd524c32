"""What a benchmark ran on: CPU, cores, library version, memory. Numbers mean little without it."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

from specllama.llama import thread_wait
from specllama.llama.backend import default_threads, library_version, system_info

try:
    import resource  # POSIX only: on Windows the peak is simply not known, and everything else runs
except ImportError:
    resource = None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def peak_rss_bytes() -> int | None:
    """The process's high-water mark of resident memory (ru_maxrss is KiB on Linux, bytes on macOS);
    None where the platform has no getrusage (Windows)."""
    if resource is None:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def current_rss_bytes() -> int | None:
    """Resident memory now (Linux); None where /proc is missing. Lets a benchmark attribute memory
    to a phase, which the monotonic peak cannot."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def machine_info(threads: int | None = None, threads_batch: int | None = None, placement: str | None = None,
                 gpu_layers: int | None = None, flash_attn: str | None = None) -> dict:
    """`placement`: where the models ran ("CPU", "GPU (all layers)"; `gpu_layers` -1 means all):
    a Metal or CUDA run and a CPU run of one machine are different machines to compare."""
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "cores_available": default_threads(),
        "threads": threads,
        "threads_batch": threads_batch,
        "placement": placement,
        "gpu_layers": gpu_layers,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "llama_cpp_python": library_version(),
        "llama_system_info": system_info(),
        "thread_wait": thread_wait.in_force(),
        "flash_attn": flash_attn,  # the target's attention (llama/attention.py): "auto" is llama.cpp's choice
        "peak_rss_bytes": peak_rss_bytes(),
    }
