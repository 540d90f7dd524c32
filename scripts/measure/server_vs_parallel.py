"""A batch through llama-cpp-python's own server vs specllama's local `batch --parallel`, same
prompts, same target, same threads, interleaved rounds; job tokens/s (model loads excluded).

llama-cpp-python's server has no parallel slots: it answers one request at a time whatever the
client's concurrency (llama.cpp's `llama-server -np N` does have them; it is not in the registry
here). So the server is driven at --concurrency 2 and compared with local --parallel 1 and 2.

    python scripts/measure/server_vs_parallel.py [--prompts bench/prompts.jsonl] [--max-tokens 64] [--rounds 2]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specllama.batch.local import run_batch  # noqa: E402
from specllama.batch.prompts_file import read_prompts  # noqa: E402
from specllama.cli.main import main  # noqa: E402
from specllama.decoding.engine import GenerationConfig  # noqa: E402
from specllama.llama.machine import cpu_model  # noqa: E402
from specllama.runtime import LoadOptions, open_runtime  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: Path, port: int, threads: int, n_ctx: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
           "--n_ctx", str(n_ctx), "--n_threads", str(threads), "--n_threads_batch", str(threads)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2):
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the server did not start")


def tokens_in(out: Path) -> int:
    return sum(json.loads(line)["tokens"] for line in out.read_text().splitlines() if line.strip())


def main_() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", default="bench/prompts.jsonl")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", help="bench/measured/NAME: also write NAME.md (the table) and NAME.json (every round)")
    args = ap.parse_args()
    items = read_prompts(args.prompts).items
    config = GenerationConfig(max_tokens=args.max_tokens, drafter="none", k=0)
    results: dict[str, list[float]] = {}
    with open_runtime(LoadOptions(load_draft=False, n_ctx=1024, parallel=2, threads=args.threads)) as rt, \
            tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        server = start_server(rt.target_path, port, args.threads, 2048)
        try:
            for r in range(args.rounds):
                for how in ("local --parallel 1", "local --parallel 2", "server, --concurrency 2"):
                    out = Path(tmp) / f"{r}-{how.replace(' ', '_')}.jsonl"
                    start = time.perf_counter()
                    if how.startswith("local"):
                        rt.opts.parallel = int(how[-1])
                        rt.reset()
                        run_batch(rt, items, config, out)
                    else:
                        with contextlib.redirect_stderr(io.StringIO()):
                            code = main(["batch", args.prompts, "-o", str(out), "--server", f"http://127.0.0.1:{port}",
                                         "--concurrency", "2", "--max-tokens", str(args.max_tokens), "--temp", "0"])
                        assert code == 0, "the server batch failed"
                    results.setdefault(how, []).append(tokens_in(out) / (time.perf_counter() - start))
        finally:
            server.kill()
            server.wait()
    lines = [f"{cpu_model()}, {args.threads} threads, target {rt.target_path.name}, {len(items)} prompts x "
             f"{args.max_tokens} tokens max, greedy, medians of {args.rounds} interleaved rounds", "",
             "| path | job tokens/s | vs local one at a time |", "|---|---|---|"]
    base = statistics.median(results["local --parallel 1"])
    for how, rates in results.items():
        lines.append(f"| {how} | {statistics.median(rates):.2f} | {statistics.median(rates) / base:.2f}x |")
    print("\n".join(lines))
    if args.out:
        command = "python " + " ".join(sys.argv)
        Path(args.out).with_suffix(".md").write_text(f"Command: `{command}`\n\n" + "\n".join(lines) + "\n")
        Path(args.out).with_suffix(".json").write_text(json.dumps(
            {"command": command, "machine": cpu_model(), "threads": args.threads, "target": rt.target_path.name,
             "prompts": len(items), "max_tokens": args.max_tokens, "rounds": args.rounds,
             "job_tokens_per_s": results}, indent=1) + "\n")


if __name__ == "__main__":
    main_()
