#!/usr/bin/env python3
"""Time to first token of a long agent-like request through `specllama serve` (the real pair):
cold, warm from the prompt cache's memory after another request took the one slot, and warm from
its disk after a restart of the server (issue 39 item 4).

The request is Anthropic's /v1/messages, streamed, as Claude Code sends it: a long system text
(synthetic: rules and tool descriptions, --system-tokens of them) and a short user turn; each
request changes only the user turn. Time to first token is measured at the client, from sending
the request to the first text (or thinking) delta; beside it, the CPU seconds the server process
spent meanwhile (from /proc: what the prefill cost, whatever else shares the cores or pauses this
process). The prompt cache's folder is a scratch one (SPECLLAMA_PROMPT_CACHE).

    flock /tmp/specllama-heavy.lock nice -n 19 .venv/bin/python scripts/measure/prompt_cache.py \\
        --out bench/measured/vm-20261125-prompt-cache
"""

from __future__ import annotations

import argparse
import copy
import http.client
import json
import os
import platform
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from specllama.llama.machine import cpu_model  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def system_text(words: int) -> str:
    """An agent's system text: instructions and tool descriptions, varied enough to tokenize like prose."""
    tools = ["Read", "Write", "Edit", "Bash", "Grep", "Glob", "WebFetch", "TodoWrite", "Task", "NotebookEdit"]
    lines, i = [], 0
    while sum(len(line.split()) for line in lines) < words:
        tool = tools[i % len(tools)]
        lines.append(f"## {tool} (variant {i})\nUse {tool} when the task needs it: rule {i} says to check the "
                     f"result of step {i * 7 % 31} before step {i * 11 % 29}, keep paths absolute, quote names with "
                     f"spaces, and report failures with the exact message. Parameters: path (string), offset "
                     f"(integer, from {i % 5}), limit (integer, at most {100 + i % 900}).")
        i += 1
    return "\n".join(lines)


class Server:
    def __init__(self, args, env: dict, log: Path):
        self.port = free_port()
        cmd = [sys.executable, "-m", "specllama", "serve", "--port", str(self.port), "--ctx", str(args.ctx),
               "--parallel", "1", "--cache-ram", str(args.cache_ram), "--cache-disk", str(args.cache_disk)]
        cmd += (["--threads", str(args.threads)] if args.threads else []) + args.serve_args
        self.log = log
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=log.open("ab"))
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"serve exited: {log.read_text()[-2000:]}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    return
            except OSError:
                time.sleep(0.5)
        raise SystemExit("serve did not start")

    def stream(self, system: str | dict, user: str, max_tokens: int) -> dict:
        """One streamed /v1/messages: seconds to the first text, the whole, and the final usage. `system`: the
        system text, or a captured request body whose first user message's last text block becomes `user`."""
        if isinstance(system, dict):
            body = copy.deepcopy(system)
            body.update(max_tokens=max_tokens, temperature=0, stream=True)
            body["messages"][0]["content"][-1]["text"] = user
        else:
            body = {"model": "x", "max_tokens": max_tokens, "temperature": 0, "stream": True, "system": system,
                    "messages": [{"role": "user", "content": user}]}
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3600)
        start, cpu0 = time.perf_counter(), self.cpu_seconds()
        conn.request("POST", "/v1/messages", json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        first, first_cpu, usage, text, pings, buffer = None, None, {}, "", 0, b""
        while chunk := response.read1(65536):
            buffer += chunk
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                data = next((line[6:] for line in event.split(b"\n") if line.startswith(b"data: ")), None)
                if data is None:
                    continue
                obj = json.loads(data)
                if obj.get("type") == "ping":
                    pings += 1
                if obj.get("type") == "content_block_delta" and first is None:
                    first = time.perf_counter() - start
                    first_cpu = self.cpu_seconds() - cpu0
                if obj.get("type") == "content_block_delta":
                    text += obj["delta"].get("text", "") or obj["delta"].get("thinking", "")
                if obj.get("type") == "message_delta":
                    usage = obj.get("usage", {})
        return {"ttft_s": round(first, 2) if first is not None else None, "ttft_cpu_s": round(first_cpu, 2)
                if first is not None else None, "total_s": round(time.perf_counter() - start, 2),
                "usage": usage, "text": text, "pings": pings}

    def cpu_seconds(self) -> float:
        """User + system CPU seconds of the server process (all its threads) so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=120)


def request_lines(log: Path) -> list[str]:
    return [line.strip() for line in log.read_text(errors="replace").splitlines() if "POST /v1/" in line]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--system-words", type=int, default=2800, help="words of system text (~1.4 tokens each)")
    ap.add_argument("--request", type=Path, help="a captured /v1/messages request (JSON with its body) instead of the "
                    "synthetic system text: each run sends it with another task as its last text")
    ap.add_argument("--ctx", type=int, default=12288)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--cache-ram", type=int, default=4096)
    ap.add_argument("--cache-disk", type=int, default=4096)
    ap.add_argument("--out", type=Path, help="write OUT.json and OUT.md")
    ap.add_argument("serve_args", nargs="*", help="more `serve` options (after --)")
    args = ap.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="specllama-prompt-cache-"))
    env = {**os.environ, "SPECLLAMA_PROMPT_CACHE": str(scratch / "prompt-cache")}
    log = scratch / "serve.log"
    # A captured request (agents_e2e.py's capture server writes {"body": ...}): Claude Code's first, whole
    system = json.loads(args.request.read_text())["body"] if args.request else system_text(args.system_words)
    other = system_text(700).replace("Use ", "Avoid ")  # another client's prompt: shares nothing useful

    server = Server(args, env, log)
    runs = {}
    try:
        runs["cold"] = server.stream(system, "Fix the bug in calc.py.", args.max_tokens)
        runs["other"] = server.stream(other, "Summarise the rules.", args.max_tokens)  # takes the slot
        runs["memory"] = server.stream(system, "Add a test for calc.py.", args.max_tokens)
    finally:
        server.stop()
    first_lines = request_lines(log)
    disk_bytes = sum(p.stat().st_size for p in (scratch / "prompt-cache").glob("*.slpc"))
    server = Server(args, env, log)
    try:
        runs["disk"] = server.stream(system, "Explain calc.py.", args.max_tokens)
    finally:
        server.stop()
    lines = request_lines(log)
    header = next(line for line in log.read_text().splitlines() if "specllama serve: http" in line)
    result = {
        "machine": f"{cpu_model()}, {os.cpu_count()} cores (shared), {platform.platform()}",
        "load_average": os.getloadavg(),
        "serve": header.split(" · ", 1)[1] if " · " in header else header,
        "options": vars(args) | {"out": str(args.out) if args.out else None,
                                 "request": str(args.request) if args.request else None},
        "prompt_tokens": runs["cold"]["usage"].get("input_tokens", 0) + runs["cold"]["usage"].get("cache_read_input_tokens", 0),
        "disk_entry_bytes": disk_bytes,
        "runs": runs,
        "request_log": lines,
    }
    for name, run in runs.items():
        print(f"{name:7} ttft {run['ttft_s']} s ({run['ttft_cpu_s']} CPU s), total {run['total_s']} s, "
              f"usage {run['usage']}")
    print("\n".join(lines))
    assert len(first_lines) == 3
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
        args.out.with_suffix(".md").write_text(markdown(result, args) + "\n")
    return 0


def markdown(r: dict, args) -> str:
    runs = r["runs"]
    cold = runs["cold"]["ttft_s"]
    rows = []
    for name, what in (("cold", "cold: nothing cached"), ("memory", "warm from memory, after another request took the slot"),
                       ("disk", "warm from disk, after a restart of serve")):
        run = runs[name]
        cached = run["usage"].get("cache_read_input_tokens", 0)
        share = f"{run['ttft_s'] / cold:.1%}" if cold and run["ttft_s"] is not None else ""
        cpu = f"{run['ttft_cpu_s'] / runs['cold']['ttft_cpu_s']:.1%}" if runs["cold"]["ttft_cpu_s"] else ""
        rows.append(f"| {what} | {cached:,} | {run['ttft_s']} | {share} | {run['ttft_cpu_s']} | {cpu} |")
    wait = os.environ.get("SPECLLAMA_THREAD_WAIT", "unset")
    what = (f"the captured request {args.request.name} (its system text, tools and reminders as the client sent them)"
            if args.request else "a synthetic system text")
    logs = "\n".join(f"    {re.sub(r'^specllama serve: ', '', line)}" for line in r["request_log"])
    return f"""# Prompt cache: time to first token of a long agent request (issue 39 item 4)

Command: `python scripts/measure/prompt_cache.py {" ".join(sys.argv[1:])}` (SPECLLAMA_THREAD_WAIT={wait})
Machine: {r['machine']}; load average {', '.join(f'{x:.1f}' for x in r['load_average'])} at the end (other work shared the cores).
serve: {r['serve']}; `--parallel 1 --ctx {args.ctx} --cache-ram {args.cache_ram} --cache-disk {args.cache_disk}`.
Request: Anthropic /v1/messages, streamed, temperature 0, max_tokens {args.max_tokens}; {what}, {r['prompt_tokens']:,}
prompt tokens in all; each request changes only the user's task. Time to first token measured
at the client; the server's CPU seconds over the same time from /proc (what the work cost, whatever else shared
the cores). Disk entries after the first server: {r['disk_entry_bytes'] / 1e6:,.0f} MB.

| request | prompt tokens cached | time to first token (s) | of cold | server CPU seconds to it | of cold |
|---|---|---|---|---|---|
{chr(10).join(rows)}

The server's request log lines:

{logs}
"""


if __name__ == "__main__":
    sys.exit(main())
