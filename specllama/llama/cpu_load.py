"""How busy the machine's CPUs are, from /proc/stat: what `--thread-wait auto` looks at as a command
starts (thread_wait.py) and what the thread cap follows afterwards (thread_share.py); and what one
process or thread has used, from its own stat file (`stat_ticks`).

Imports nothing from llama_cpp: it runs before the library loads.
"""

from __future__ import annotations


def cpu_times() -> tuple[int, int] | None:
    """(busy, total) scheduler ticks of all CPUs since boot; None where /proc/stat is not there."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


def busy_cores(before: tuple[int, int], after: tuple[int, int], cores: int) -> float:
    """Cores' worth of CPU time used between two cpu_times() samples."""
    busy, total = after[0] - before[0], after[1] - before[1]
    return cores * busy / total if total > 0 else 0.0


def stat_ticks(path: str) -> int | None:
    """Scheduler ticks a process or thread has run, user and system, from its /proc stat file
    (/proc/self/stat, /proc/PID/task/TID/stat); None where it cannot be read."""
    try:
        with open(path) as f:
            fields = f.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        return int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of proc(5)
    except (OSError, IndexError, ValueError):
        return None
