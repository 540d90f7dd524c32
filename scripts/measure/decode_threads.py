"""One-token decodes from one thread, against the same decodes after another thread (still alive) ran
one decode of its own: what libgomp's per-thread pools cost (specllama/llama/decode_threads.py).

Each round: STEPS decodes on the main thread; then a second thread decodes one token and waits;
STEPS decodes on the main thread again; the second thread exits. Per phase: the median decode, the
process's CPU time over wall time (2.00 on two cores when the threads spin), and its voluntary
context switches (a worker asleep at a barrier is one).

    flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/decode_threads.py \
        [--rounds 3] [--steps 40] [--fill 400] [--out bench/measured/NAME]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from report_files import measured_model, show_and_write  # noqa: E402

from specllama.llama import thread_wait  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--fill", type=int, default=400, help="tokens in the cache before the timed decodes")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--model")
    p.add_argument("--out", help="write OUT.md and OUT.json")
    args = p.parse_args(argv)
    thread_wait.configure(None, args.threads)  # as every command does, before llama.cpp loads

    from specllama.llama.context import DecodeContext, DecodePart
    from specllama.llama.machine import cpu_model
    from specllama.llama.model import GGUFModel

    path = measured_model(args.model)
    model = GGUFModel(path)
    ctx = DecodeContext(model, n_ctx=4096, n_threads=args.threads)
    vocab = model.n_vocab
    ctx.decode([(1000 + 37 * i) % vocab for i in range(args.fill)], logits="none")

    def phase() -> dict:
        times = []
        r0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        for s in range(args.steps):
            t = time.perf_counter()
            ctx.decode_parts([DecodePart(0, [(2000 + s) % vocab], "all")])
            times.append(time.perf_counter() - t)
            ctx.rollback(args.fill)
        r1, w1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
        return {"median_ms": round(statistics.median(times) * 1000, 2), "cores": round(cpu / (w1 - w0), 3),
                "voluntary_switches": r1.ru_nvcsw - r0.ru_nvcsw}

    runs = []
    for r in range(args.rounds):
        runs.append({"round": r, "phase": "one thread", **phase()})
        done = threading.Event()

        def other() -> None:
            ctx.decode_parts([DecodePart(0, [5], "all")])
            ctx.rollback(args.fill)
            done.wait()

        second = threading.Thread(target=other)
        second.start()
        time.sleep(0.5)
        runs.append({"round": r, "phase": "another thread decoded, still alive", **phase()})
        done.set()
        second.join()
        for x in runs[-2:]:
            print(x, flush=True)
    ctx.close()
    head = (f"{cpu_model()}, threads {args.threads} ({thread_wait.in_force()}); target {path.name}; one-token decodes "
            f"at a fill of {args.fill}, {args.steps} a phase, {args.rounds} rounds")
    lines = ["| round | phase | median ms | cores | voluntary switches |", "|---|---|---|---|---|"]
    lines += [f"| {x['round']} | {x['phase']} | {x['median_ms']:.1f} | {x['cores']:.2f} | {x['voluntary_switches']} |"
              for x in runs]
    show_and_write(args.out, "Decodes from one thread, and after another thread decoded", "decode_threads.py",
                   argv if argv is not None else sys.argv[1:], head, lines, {"runs": runs})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
