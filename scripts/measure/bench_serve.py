"""Benchmark `specllama serve` (issues 21 and 29) with the official openai client, three parts:

  throughput  aggregate tokens/s for 1, 4 and 16 concurrent clients, specllama serve (default
              drafter auto) against llama-cpp-python's own server on the same target file;
  latency     time to the first token of a short streamed request, idle and while 3 others stream;
  agentic     bench/agent_sessions.json (or --sessions-file) replayed as an agent sends it (each request re-sends the whole
              conversation and asks for the whole file back): specllama's drafter auto against none
              (plain), and with --llama-server PATH llama.cpp's own server beside it, plain
              (`llama-server`) and with its default speculation (`llama-server-spec`: --spec-default,
              ngram-mod drafts from the context, no draft model), on the same target GGUF file.

Every measurement starts a fresh server, so no run drafts from another run's answers (the suffix
drafter's history, and llama-server's n-gram table, live as long as the server). Every specllama
server gets a fresh, empty cost cache (SPECLLAMA_COSTS pointing to a new temporary directory), so
`auto` is measured as a new user's first session would see it; --keep-costs uses the normal cache.
Runs are interleaved (A B C D, then D C B A), greedy (temperature 0), with the same threads, context
and max_tokens for every server. The agentic report gives each mode's median wall time and tokens/s,
its ratio to its own plain baseline (specllama auto / none; llama-server-spec / llama-server), the
per-request ratios (each turn against the same turn of the baseline in the same round, median over
rounds; the worst one named), and whether the texts are identical; OUT.json holds every run.

The issue-29 agentic measurement (fresh cost cache, llama.cpp's server side by side):

  flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/bench_serve.py --parts agentic --rounds 3 \
      --llama-server /work/llama-server-build/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin/llama-server \
      --out bench/measured/vm-20261125-serve-replay

Everything:

  flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/bench_serve.py --parts all --out bench/measured/NAME
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import openai

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from report_files import repo_path  # noqa: E402

from specllama.llama.machine import cpu_model  # noqa: E402
from specllama.models import store  # noqa: E402
from specllama.models.registry import load_registry  # noqa: E402

LEVELS = (1, 4, 16)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# OpenMP's wait variables as specllama set them in this process (importing it applies its thread
# wait level, specllama/llama/thread_wait.py), with the mark saying so. Until 2026-11-26 every server
# here inherited them, llama-server too: it ran with our short spin (GOMP_SPINCOUNT=1000), not the
# libgomp default its users get (300000). Each server now starts from the environment as it was before
# specllama touched it: specllama serve chooses its own level again, llama-server runs as shipped.
OPENMP_SET_BY_US = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "SPECLLAMA_THREAD_WAIT_APPLIED")


def base_env() -> dict:
    """The environment without what specllama's import set (a user's own OpenMP variables stay)."""
    if "SPECLLAMA_THREAD_WAIT_APPLIED" not in os.environ:
        return dict(os.environ)
    return {k: v for k, v in os.environ.items() if k not in OPENMP_SET_BY_US}


class Server:
    """A server subprocess on 127.0.0.1, ready once GET /v1/models answers (llama-server answers 503
    while it loads). `env` adds to the environment; `scratch` is a directory removed when it stops."""

    def __init__(self, name: str, cmd: list[str], port: int, log: Path, env: dict | None = None,
                 scratch: Path | None = None):
        self.name, self.port, self.scratch = name, port, scratch
        self.learnt: dict | None = None  # specllama's: the costs its steps taught it (learnt_costs), once stopped
        self.url = f"http://127.0.0.1:{port}"
        # REPO first, the caller's path kept (a machine whose llama_cpp lives on PYTHONPATH, as on the device)
        path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        env = {**base_env(), "PYTHONPATH": path, **(env or {})}
        with log.open("ab") as f:
            f.write(f"\n=== {' '.join(cmd)}\n".encode())
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=log.open("ab"))
        try:
            self._wait_ready(log)
        except BaseException:  # interrupted while it starts: leave no server behind
            self.stop()
            raise

    def _wait_ready(self, log: Path) -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name} exited: see {log}")
            try:
                with urllib.request.urlopen(self.url + "/v1/models", timeout=2) as r:
                    self.model = json.loads(r.read())["data"][0]["id"]
                    return
            except OSError:
                time.sleep(0.2)
        raise SystemExit(f"{self.name} did not start: see {log}")

    def props(self) -> dict:
        try:
            with urllib.request.urlopen(self.url + "/props", timeout=5) as r:
                return json.loads(r.read())
        except OSError:
            return {}

    def client(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.url + "/v1", api_key="none", max_retries=0, timeout=1200)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.scratch:
            self.learnt = learnt_costs(self.scratch / "costs")
            shutil.rmtree(self.scratch, ignore_errors=True)


def learnt_costs(folder: Path) -> dict | None:
    """What a specllama server's own steps taught it of the costs (T(1) and T(n)/T(1) per row count timed,
    as it saved them on closing), read before its scratch folder goes: policy_replay.py --learnt replays
    a sitting's texts on that sitting's costs (a verify_rows.py curve of another hour may be off: the 2-core
    host's T(1) measured 31.9 ms at one hour and 24.3 ms two hours later, its batches unchanged)."""
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        with contextlib.suppress(OSError, ValueError):
            learned = json.loads(path.read_text()).get("learned")
            if isinstance(learned, dict) and "t1_s" in learned:
                return {"t1_s": learned["t1_s"], "ratios": learned["ratios"]}
    return None


def specllama_server(args, log: Path, env: dict | None = None) -> Server:
    """A fresh `specllama serve`; unless --keep-costs, with an empty cost cache of its own, so what it
    decides is what a new user's first session gets (not what earlier runs on this machine learnt).
    `env` adds to its environment."""
    port = free_port()
    cmd = [sys.executable, "-m", "specllama", "serve", "--port", str(port), "--threads", str(args.threads),
           "--ctx", str(args.ctx), "--parallel", args.parallel, *args.specllama_args]
    # The prompt cache's disk folder is the server's own too: an earlier round's entries would make
    # a "fresh" server start warm (llama-server keeps nothing across restarts).
    scratch = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    env = {"SPECLLAMA_PROMPT_CACHE": str(scratch / "prompt-cache"), **(env or {})}
    if not args.keep_costs:
        env["SPECLLAMA_COSTS"] = str(scratch / "costs")
    return Server("specllama serve", cmd, port, log, env=env, scratch=scratch)


def llama_cpp_server(args, target: Path, log: Path) -> Server:
    port = free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(target), "--host", "127.0.0.1", "--port", str(port),
           "--n_ctx", str(args.ctx), "--n_threads", str(args.threads), "--n_threads_batch", str(args.threads)]
    return Server("llama-cpp-python server", cmd, port, log)


# llama.cpp's own server, by mode: plain, and its default speculation (--spec-default: ngram-mod
# drafting from the context, n_match 24, drafts of 48-64 tokens; no draft model needed).
LLAMA_SERVER_MODES = {"llama-server": [], "llama-server-spec": ["--spec-default"]}


def llama_server(args, target: Path, mode: str, log: Path) -> Server:
    """A fresh llama-server on the same target file, threads and context as specllama's. Its slot count
    is its own default (auto: 4 slots sharing one unified KV cache of --ctx, so one agent gets it all)."""
    port = free_port()
    cmd = [args.llama_server, "-m", str(target), "-t", str(args.threads), "-c", str(args.ctx), "--host", "127.0.0.1",
           "--port", str(port), *LLAMA_SERVER_MODES[mode]]
    return Server(mode, cmd, port, log)


def llama_server_version(path: str) -> str:
    """`llama-server --version`'s line (it prints to stderr), e.g. "version: 1 (abc123) built with ..."."""
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown ({e})"
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith(("version", "built"))]
    return "; ".join(lines) or "unknown"


# --- throughput ------------------------------------------------------------------------------------

def code_prompts() -> list[str]:
    lines = (REPO / "bench" / "prompts.jsonl").read_text().splitlines()
    return [json.loads(line)["prompt"] for line in lines if line.strip()]


async def run_clients(server: Server, prompts: list[str], clients: int, max_tokens: int) -> dict:
    """Every prompt once, `clients` at a time; aggregate completion tokens / wall time."""
    sem = asyncio.Semaphore(clients)
    async with server.client() as client:
        async def one(prompt: str):
            async with sem:
                return await client.chat.completions.create(
                    model=server.model, messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens,
                    temperature=0)

        started = time.perf_counter()
        replies = await asyncio.gather(*(one(p) for p in prompts))
        wall = time.perf_counter() - started
    tokens = sum(r.usage.completion_tokens for r in replies)
    return {"requests": len(prompts), "tokens": tokens, "seconds": round(wall, 3), "tokens_per_s": round(tokens / wall, 3)}


def throughput(args, target: Path, logs: Path) -> list[dict]:
    prompts = code_prompts()
    runs = []
    llama = llama_cpp_server(args, target, logs / "llama_cpp_server.log")
    try:
        for r in range(args.rounds):
            for level in LEVELS:
                batch = [f"{prompts[i % len(prompts)]} (request {r}-{level}-{i})" for i in range(max(level, 8))]
                order = ("specllama", "llama-cpp") if (r + LEVELS.index(level)) % 2 == 0 else ("llama-cpp", "specllama")
                for name in order:
                    if name == "specllama":
                        server = specllama_server(args, logs / "specllama_serve.log")  # fresh: no history
                        try:
                            result = asyncio.run(run_clients(server, batch, level, args.max_tokens))
                            result["slots"] = server.props().get("total_slots")
                        finally:
                            server.stop()
                    else:
                        result = asyncio.run(run_clients(llama, batch, level, args.max_tokens))
                    runs.append({"part": "throughput", "server": name, "clients": level, "round": r, **result})
                    print(f"  throughput round {r} {level:>2} clients {name:<10} {result['tokens_per_s']:7.2f} tok/s "
                          f"({result['tokens']} tokens, {result['seconds']:.1f} s)", flush=True)
    finally:
        llama.stop()
    return runs


# --- latency ----------------------------------------------------------------------------------------

async def first_token_seconds(client, model: str, prompt: str) -> float:
    started = time.perf_counter()
    stream = await client.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}],
                                                  max_tokens=8, temperature=0, stream=True)
    seconds = None
    async for chunk in stream:
        if seconds is None and chunk.choices and chunk.choices[0].delta.content:
            seconds = time.perf_counter() - started
    return seconds if seconds is not None else time.perf_counter() - started


async def latency_run(server: Server, repeats: int) -> dict:
    prompts = code_prompts()
    async with server.client() as client:
        await first_token_seconds(client, server.model, "Say hello.")  # warm-up: the first decode allocates buffers
        idle = [await first_token_seconds(client, server.model, f"Say hello to user number {i}.")
                for i in range(repeats)]
        started = asyncio.Event()
        first_seen = [0]

        async def long_stream(prompt: str):
            stream = await client.chat.completions.create(model=server.model, messages=[{"role": "user", "content": prompt}],
                                                          max_tokens=400, temperature=0, stream=True)
            async for _ in stream:
                first_seen[0] += 1
                if first_seen[0] >= 3 * 2:
                    started.set()
                if stop_streams.is_set():
                    await stream.close()
                    return

        stop_streams = asyncio.Event()
        streams = [asyncio.ensure_future(long_stream(p)) for p in prompts[:3]]
        await asyncio.wait_for(started.wait(), 300)
        busy = [await first_token_seconds(client, server.model, f"Say goodbye to user number {i}.")
                for i in range(repeats)]
        stop_streams.set()
        await asyncio.gather(*streams)
    return {"idle": [round(s, 4) for s in idle], "busy": [round(s, 4) for s in busy],
            "idle_median": round(statistics.median(idle), 4), "busy_median": round(statistics.median(busy), 4)}


def latency(args, logs: Path) -> list[dict]:
    server = specllama_server(args, logs / "specllama_serve.log")
    try:
        result = asyncio.run(latency_run(server, args.latency_repeats))
        result["slots"] = server.props().get("total_slots")
    finally:
        server.stop()
    print(f"  first token: idle median {result['idle_median'] * 1000:.0f} ms, while 3 stream "
          f"{result['busy_median'] * 1000:.0f} ms ({result['busy_median'] / result['idle_median']:.2f}x)", flush=True)
    return [{"part": "latency", **result}]


# --- agentic replay ------------------------------------------------------------------------------------

def mode_fields(mode: str) -> dict:
    """A --modes entry as request fields: "auto", "none", or "suffix:k=4" (a drafter and its k)."""
    drafter, _, k = mode.partition(":k=")
    return {"drafter": drafter, **({"k": int(k)} if k else {})}


def agent_ask(session: dict, n: int, change: str) -> str:
    """Turn n's user message as the replay sends it: the file and the first change, then each change alone."""
    return f"{session['file']}:\n```python\n{session['content']}```\n\n{change}" if n == 0 else change


def first_request(session_id: str, sessions_file: Path = REPO / "bench" / "agent_sessions.json") -> tuple[str, str]:
    """(system message, user message) of a session's first turn, as the replay sends it."""
    sessions = json.loads(sessions_file.read_text())
    session = next(s for s in sessions["sessions"] if s["id"] == session_id)
    return sessions["system"], agent_ask(session, 0, session["turns"][0])


def answer_tokens(mode: str, reported: int, finish: str | None) -> int:
    """The answer's own tokens from a server's completion_tokens: llama-server counts the end-of-generation
    token it stopped on (an identical text: ours 219, its 220; the text re-tokenized: 219), specllama does not.
    Counted alike, per-token figures and tokens/s compare the same thing (before 2026-11-28 llama-server's
    were ~0.5 % in its favour)."""
    return reported - 1 if mode in LLAMA_SERVER_MODES and finish == "stop" and reported > 0 else reported


async def replay(server: Server, sessions: dict, mode: str, max_tokens: int) -> dict:
    """Each session as an agent runs it: turn 1 sends the file and the first change; every next turn
    re-sends everything so far (with the model's own answers) plus the next change."""
    turns, texts = [], []
    extra = {} if mode in LLAMA_SERVER_MODES else mode_fields(mode)
    async with server.client() as client:
        started = time.perf_counter()
        for session in sessions["sessions"]:
            messages = [{"role": "system", "content": sessions["system"]}]
            for n, change in enumerate(session["turns"]):
                messages.append({"role": "user", "content": agent_ask(session, n, change)})
                t0 = time.perf_counter()
                reply = await client.chat.completions.create(model=server.model, messages=messages, max_tokens=max_tokens,
                                                             temperature=0, extra_body=extra)
                text = reply.choices[0].message.content
                messages.append({"role": "assistant", "content": text})
                extra_fields = reply.model_extra or {}
                spec = extra_fields.get("speculation") or {}
                timings = extra_fields.get("timings") or {}  # llama-server's: draft_n, draft_n_accepted
                drafted_by = spec.get("drafted_by") or ({"ngram": timings["draft_n"]} if timings.get("draft_n") else {})
                accepted_by = spec.get("accepted_by") or (
                    {"ngram": timings["draft_n_accepted"]} if timings.get("draft_n_accepted") else {})
                details = reply.usage.prompt_tokens_details
                finish = reply.choices[0].finish_reason
                turns.append({"session": session["id"], "turn": n, "seconds": round(time.perf_counter() - t0, 3),
                              "tokens": answer_tokens(mode, reply.usage.completion_tokens, finish),
                              "reported_tokens": reply.usage.completion_tokens, "prompt_tokens": reply.usage.prompt_tokens,
                              "cached_tokens": (details.cached_tokens or 0) if details else 0,
                              "drafted_by": drafted_by, "accepted_by": accepted_by,
                              "finish_reason": finish})
                texts.append(text)
        wall = time.perf_counter() - started
    tokens = sum(t["tokens"] for t in turns)
    return {"seconds": round(wall, 3), "tokens": tokens, "tokens_per_s": round(tokens / wall, 3), "turns": turns,
            "texts": texts}


def agentic(args, target: Path, logs: Path) -> list[dict]:
    sessions = json.loads(args.sessions_file.read_text())
    sessions["sessions"] = sessions["sessions"][:args.sessions]
    modes = args.modes.split(",") + (list(LLAMA_SERVER_MODES) if args.llama_server else [])
    runs = []
    for r in range(args.rounds):
        for mode in (modes if r % 2 == 0 else modes[::-1]):
            # Fresh every time: no history, empty caches, (specllama) an empty cost cache.
            server = (llama_server(args, target, mode, logs / "llama_server.log") if mode in LLAMA_SERVER_MODES
                      else specllama_server(args, logs / "specllama_serve.log"))
            try:
                result = asyncio.run(replay(server, sessions, mode, args.agent_max_tokens))
            finally:
                server.stop()
            learnt = {"learnt_costs": server.learnt} if server.learnt else {}
            runs.append({"part": "agentic", "drafter": mode, "round": r, **result, **learnt})
            accepted = sum(sum(t["accepted_by"].values()) for t in result["turns"])
            print(f"  agentic round {r} {mode:<18} {result['seconds']:7.1f} s, {result['tokens']} tokens, "
                  f"{result['tokens_per_s']:.2f} tok/s, {accepted} drafts accepted", flush=True)
    return runs


BASELINE = {"llama-server-spec": "llama-server"}  # every other mode is compared with specllama's none


def per_request(ag: list[dict], mode: str, base: str, per_token: bool = False) -> list[tuple[str, float]]:
    """(session/turn, median over rounds of the baseline's seconds over this mode's in the same round);
    `per_token`: seconds a token of the answer, which sets apart an answer that is longer (a greedy near-tie
    that went another way: the same request, 341 tokens against plain's 238) from one that is slower."""
    out = []
    keys = [(t["session"], t["turn"]) for t in next(r for r in ag if r["drafter"] == mode)["turns"]]
    for i, key in enumerate(keys):
        ratios = []
        for r in {x["round"] for x in ag}:
            a = next((x for x in ag if x["drafter"] == mode and x["round"] == r), None)
            b = next((x for x in ag if x["drafter"] == base and x["round"] == r), None)
            if a and b and i < len(a["turns"]) and i < len(b["turns"]) and a["turns"][i]["seconds"] > 0:
                mine, theirs = a["turns"][i], b["turns"][i]
                scale = mine["tokens"] / theirs["tokens"] if per_token and mine["tokens"] and theirs["tokens"] else 1.0
                ratios.append(theirs["seconds"] / mine["seconds"] * scale)
        if ratios:
            out.append((f"{key[0]}/{key[1]}", statistics.median(ratios)))
    return out


# --- report -----------------------------------------------------------------------------------------

def thread_wait_label() -> str:
    """How specllama's servers' threads waited: the environment they inherit, else its default."""
    env = base_env()
    given = [f"{v}={env[v]}" for v in ("SPECLLAMA_THREAD_WAIT", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT") if v in env]
    return ", ".join(given) or "specllama's default (spin); llama-server: libgomp's default"


def report(runs: list[dict], args, target: Path) -> str:
    lines = [f"# specllama serve benchmark ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
             f"Machine: {cpu_model()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}; "
             f"threads {args.threads}; thread wait: {thread_wait_label()}; greedy." + (f" {args.note}" if args.note else ""),
             f"Target: {target.name}; specllama serve --parallel {args.parallel} --ctx {args.ctx} "
             f"{' '.join(args.specllama_args)} (default pair: the draft model is loaded only where it can pay)", ""]
    tp = [r for r in runs if r["part"] == "throughput"]
    if tp:
        lines += ["## Aggregate throughput (tokens/s, medians over rounds; every prompt once, N clients at a time)", "",
                  f"max_tokens {args.max_tokens}; 8 requests at 1 and 4 clients, 16 at 16; a fresh specllama "
                  "server for each measurement.", "",
                  "| clients | specllama serve | llama-cpp-python server | ratio | specllama slots |", "|---|---|---|---|---|"]
        for level in LEVELS:
            ours = [r["tokens_per_s"] for r in tp if r["clients"] == level and r["server"] == "specllama"]
            theirs = [r["tokens_per_s"] for r in tp if r["clients"] == level and r["server"] == "llama-cpp"]
            slots = {r.get("slots") for r in tp if r["clients"] == level and r["server"] == "specllama"}
            lines.append(f"| {level} | {statistics.median(ours):.2f} | {statistics.median(theirs):.2f} | "
                         f"{statistics.median(ours) / statistics.median(theirs):.2f}x | {', '.join(map(str, slots))} |")
        one = statistics.median([r["tokens_per_s"] for r in tp if r["clients"] == 1 and r["server"] == "specllama"])
        four = statistics.median([r["tokens_per_s"] for r in tp if r["clients"] == 4 and r["server"] == "specllama"])
        lines += ["", f"specllama serve, 4 clients vs 1: {four / one:.2f}x (goal >= 1.3x)", ""]
    lat = [r for r in runs if r["part"] == "latency"]
    for r in lat:
        lines += ["## First token of a short request (streamed, max_tokens 8)", "",
                  f"idle: median {r['idle_median'] * 1000:.0f} ms {r['idle']}; while 3 others stream: median "
                  f"{r['busy_median'] * 1000:.0f} ms {r['busy']}; ratio {r['busy_median'] / r['idle_median']:.2f}x "
                  f"(goal < 2x); slots {r.get('slots')}", ""]
    ag = [r for r in runs if r["part"] == "agentic"]
    if ag:
        lines += [f"## Agentic replay (the first {args.sessions} sessions of {repo_path(args.sessions_file)}, one agent, "
                  "sessions in turn; every server fresh"
                  + ("" if args.keep_costs else ", specllama with an empty cost cache") + ")", ""]
        if args.llama_server:
            lines += [f"llama-server: {args.llama_server} ({llama_server_version(args.llama_server)}), same target file, "
                      f"-t {args.threads} -c {args.ctx}; `llama-server-spec` adds --spec-default.", ""]
        lines += ["| round | mode | seconds | tokens | tokens/s | drafts accepted / drafted (by source) | prompt tokens cached |",
                  "|---|---|---|---|---|---|---|"]
        for r in ag:
            acc: dict = {}
            dr: dict = {}
            for t in r["turns"]:
                for k, v in t["accepted_by"].items():
                    acc[k] = acc.get(k, 0) + v
                for k, v in t["drafted_by"].items():
                    dr[k] = dr.get(k, 0) + v
            by = ", ".join(f"{k} {acc.get(k, 0)}/{v}" for k, v in dr.items()) or "-"
            cached = sum(t["cached_tokens"] for t in r["turns"])
            prompt = sum(t["prompt_tokens"] for t in r["turns"])
            lines.append(f"| {r['round']} | {r['drafter']} | {r['seconds']:.1f} | {r['tokens']} | {r['tokens_per_s']:.2f} | "
                         f"{by} | {cached}/{prompt} |")
        lines.append("")
        for mode in dict.fromkeys(r["drafter"] for r in ag):
            base = BASELINE.get(mode, "none")
            if mode == base or mode in BASELINE.values() or not any(r["drafter"] == base for r in ag):
                continue
            plain = statistics.median([r["seconds"] for r in ag if r["drafter"] == base])
            plain_rate = statistics.median([r["tokens_per_s"] for r in ag if r["drafter"] == base])
            wall = statistics.median([r["seconds"] for r in ag if r["drafter"] == mode])
            rate = statistics.median([r["tokens_per_s"] for r in ag if r["drafter"] == mode])
            each = per_request(ag, mode, base)
            worst = min(each, key=lambda x: x[1]) if each else ("-", float("nan"))
            lines.append(f"- **{mode} vs {base}: {plain / wall:.2f}x** by median wall time, {rate / plain_rate:.2f}x by median "
                         f"tokens/s; per request (median over rounds): {', '.join(f'{k} {v:.2f}x' for k, v in each)}; "
                         f"worst {worst[0]} {worst[1]:.2f}x")
        if any(r["drafter"] == "llama-server" for r in ag):
            lines += ["", "In absolute time, against llama.cpp's own plain server (`llama-server`, same file and threads):", "",
                      "| mode | median seconds | vs llama-server | worst request vs llama-server | the same, per token "
                      "of its answer |", "|---|---|---|---|---|"]
            anchor = statistics.median([r["seconds"] for r in ag if r["drafter"] == "llama-server"])
            for mode in dict.fromkeys(r["drafter"] for r in ag):
                wall = statistics.median([r["seconds"] for r in ag if r["drafter"] == mode])
                cells = []
                for per_token in (False, True):
                    each = per_request(ag, mode, "llama-server", per_token) if mode != "llama-server" else []
                    worst = min(each, key=lambda x: x[1]) if each else None
                    cells.append(f"{worst[0]} {worst[1]:.2f}x" if worst else "-")
                lines.append(f"| {mode} | {wall:.1f} | {anchor / wall:.2f}x | {cells[0]} | {cells[1]} |")
        ours = [r for r in ag if r["drafter"] not in LLAMA_SERVER_MODES]
        same = all(a["texts"] == b["texts"] for a in ours for b in ours)
        lines += ["", f"identical texts in every specllama run: {same}", ""]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parts", default="all", help="comma-separated: throughput, latency, agentic (default all)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ctx", type=int, default=4096)
    p.add_argument("--parallel", default="auto", help="specllama serve --parallel (default auto)")
    p.add_argument("--max-tokens", type=int, default=32, help="per request in the throughput part")
    p.add_argument("--agent-max-tokens", type=int, default=600)
    p.add_argument("--latency-repeats", type=int, default=5)
    p.add_argument("--modes", default="auto,none",
                   help="agentic: drafters to compare, e.g. auto,none or suffix:k=4,none (none is the baseline)")
    p.add_argument("--sessions", type=int, default=3, help="replay the first N sessions of the sessions file")
    p.add_argument("--sessions-file", type=Path, default=REPO / "bench" / "agent_sessions.json",
                   help="agentic: the edit sessions to replay (default bench/agent_sessions.json; "
                        "bench/agent_sessions_heldout.json holds sessions no policy was tuned on)")
    p.add_argument("--target", default="qwen2.5-coder-1.5b", help="llama-cpp-python's model (the default pair's target)")
    p.add_argument("--out", help="write OUT.md (report) and OUT.json (every run)")
    p.add_argument("--llama-server", metavar="PATH", help="agentic: also llama.cpp's llama-server, plain and --spec-default")
    p.add_argument("--note", default="", help="a line for the report: the device, e.g. 'H100, all layers on the GPU'")
    p.add_argument("--keep-costs", action="store_true", help="specllama serve uses the normal cost cache, not an empty one")
    p.add_argument("specllama_args", nargs="*", help="more options for specllama serve (after --)")
    args = p.parse_args()
    # Stopped by SIGTERM, or SIGINT where a background shell ignored it: the servers are stopped and
    # the parts that finished are reported.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    parts = {"throughput", "latency", "agentic"} if args.parts == "all" else set(args.parts.split(","))
    target = Path(args.target) if Path(args.target).is_file() else store.ensure(load_registry().model(args.target))
    logs = Path("/tmp") / f"bench_serve_logs_{os.getpid()}"
    logs.mkdir(parents=True, exist_ok=True)
    print(f"bench_serve: logs in {logs}", flush=True)
    runs: list[dict] = []
    try:
        if "latency" in parts:
            runs += latency(args, logs)
        if "throughput" in parts:
            runs += throughput(args, target, logs)
        if "agentic" in parts:
            runs += agentic(args, target, logs)
    except KeyboardInterrupt:  # a part cut short: the report covers the parts that finished
        print("bench_serve: interrupted; reporting the parts that finished", flush=True)
    text = report(runs, args, target)
    print(text)
    if args.out:
        Path(args.out + ".md").write_text(text + "\n")
        Path(args.out + ".json").write_text(json.dumps(runs, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
