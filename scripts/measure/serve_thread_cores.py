"""How busy each thread of a server is while it answers one request: CPU time per thread (from
/proc/PID/task) over the answer's wall time, and the process's voluntary context switches.

Why: two threads that decode with OpenMP and spin at its barriers keep two cores busy (llama-server:
0.99 + 0.98); threads that sleep at barriers show less and switch thousands of times an answer
(llama/decode_threads.py). One request of the agent replay (bench_serve.py's textstats/0), sent once
to fill the prompt cache, then again, measured; `specllama serve --drafter none` and, with
--llama-server, llama-server after it.

    flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/serve_thread_cores.py \
        [--llama-server PATH] [--out bench/measured/NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts" / "measure"))

import bench_serve as bs  # noqa: E402
import serve_plain_turns as spt  # noqa: E402
from report_files import show_and_write  # noqa: E402

from specllama.llama.cpu_load import stat_ticks  # noqa: E402
from specllama.llama.machine import cpu_model  # noqa: E402


def thread_ticks(pid: int) -> dict[tuple[str, str], int]:
    """(thread id, name) -> user + system ticks so far."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
        except OSError:  # a thread that ended meanwhile
            continue
        ticks = stat_ticks(f"/proc/{pid}/task/{tid}/stat")
        if ticks is not None:
            out[(tid, name)] = ticks
    return out


def voluntary_switches(pid: int) -> int:
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


def measure(server: bs.Server, messages: list[dict], extra: dict) -> dict:
    asyncio.run(spt.ask(server, messages, extra))  # the prompt now cached: the measured answer is mostly decode
    again = messages[:-1] + [dict(messages[-1], content=messages[-1]["content"] + " ")]
    pid = server.proc.pid
    ticks, switches, start = thread_ticks(pid), voluntary_switches(pid), time.perf_counter()
    first, seconds, tokens = asyncio.run(spt.ask(server, again, extra))
    wall = time.perf_counter() - start
    after, switched = thread_ticks(pid), voluntary_switches(pid) - switches
    hz = os.sysconf("SC_CLK_TCK")
    busy = sorted(((after[k] - ticks.get(k, 0)) / hz / wall for k in after), reverse=True)
    return {"server": server.name, "seconds": round(seconds, 2), "tokens": tokens,
            "tok_s_after_first": round((tokens - 1) / (seconds - first), 2),
            "busiest_threads_cores": [round(b, 2) for b in busy[:3]], "cores": round(sum(busy), 2),
            "voluntary_switches": switched}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--llama-server", metavar="PATH")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", help="write OUT.md and OUT.json")
    args = p.parse_args(argv)
    settings, target = spt.server_settings(args.threads, args.llama_server), spt.TARGET
    _, messages = next(c for c in spt.replay_requests() if c[0] == "textstats/0")
    log = Path("/tmp/serve_thread_cores.log")
    runs = []
    for make, extra in ((lambda: bs.specllama_server(settings, log), {"drafter": "none"}),
                        (lambda: bs.llama_server(settings, target, "llama-server", log), {})):
        if extra == {} and not args.llama_server:
            continue
        server = make()
        try:
            runs.append(measure(server, messages, extra))
            print(runs[-1], flush=True)
        finally:
            server.stop()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    head = (f"{cpu_model()}, threads {args.threads}; target {target.name}; specllama at {commit}; one server at a time, "
            "textstats/0 of the agent replay answered twice, the second answer measured")
    lines = ["| server | seconds | tokens | tok/s after the first | busiest threads (cores) | all threads (cores) | "
             "voluntary switches |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['server']} | {r['seconds']:.2f} | {r['tokens']} | {r['tok_s_after_first']:.2f} | "
              f"{' + '.join(f'{b:.2f}' for b in r['busiest_threads_cores'])} | {r['cores']:.2f} | {r['voluntary_switches']} |"
              for r in runs]
    show_and_write(args.out, "Each server thread's share of the cores during one answer", "serve_thread_cores.py",
                   argv if argv is not None else sys.argv[1:], head, lines, {"runs": runs})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
