#!/usr/bin/env python3
"""Real agent clients, end to end, through `specllama serve` (issue 39): each client installed at a
pinned version into a scratch folder, pointed at one `serve` of the real pair, given the same small
edit in a scratch git repository; one row per client:

    client | version | finished | edit applied | seconds | requests (failed, left) | prompt (cached) | drafted (accepted) | verdict

The verdict tells "the server failed" (a request answered other than 200 or 499, a client error naming an
HTTP status or an unreadable answer, serve's log holding a traceback) from "the model answered
badly" (every request answered 200, yet no correct edit), with the evidence: serve's log lines for
that client and the tail of the client's own output, all kept under the scratch folder.

Not part of the test suite: a ~10k-token agent prompt takes minutes to prefill on a small CPU.
Run it alone (it loads the real pair):

    flock /tmp/specllama-heavy.lock nice -n 19 python scripts/measure/agents_e2e.py --clients claude,codex
    python scripts/measure/agents_e2e.py --clients opencode --scratch /tmp/e2e --ctx 16384 --timeout 900

Clients: claude (Claude Code, /v1/messages), codex (Codex CLI, /v1/responses), opencode and qwen
(OpenAI chat), aider (OpenAI chat, whole-file edits), mini-swe-agent (OpenAI chat through litellm, one
bash tool). Node >= 20 and npm for the first four; aider and mini-swe-agent go into their own venvs.

`--server llama-server --llama-server PATH` runs the same clients against llama.cpp's own server
(the target GGUF alone, `--jinja`, the same -t and -c) behind a logging proxy (logging_proxy.py: llama-server
logs no requests), so the report has a column per server.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

import logging_proxy  # this folder's; the script runs as a file, so its folder is on sys.path

REPO = Path(__file__).resolve().parents[2]
NPM = {"claude": ("@anthropic-ai/claude-code", "2.1.332"), "codex": ("@openai/codex", "0.169.0"),
       "opencode": ("opencode-ai", "1.18.33"), "qwen": ("@qwen-code/qwen-code", "0.24.4")}
PIP = {"aider": ("aider-chat", "0.86.2"), "mini-swe-agent": ("mini-swe-agent", "2.4.6")}
PIP_BIN = {"aider": "aider", "mini-swe-agent": "mini"}
TARGET_GGUF = Path.home() / ".cache/specllama/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
TASK = ("The function add in calc.py returns the wrong result: add(2, 3) should be 5. Fix the bug by editing "
        "calc.py. Do not create other files.")
CALC = "def add(a, b):\n    \"\"\"The sum of a and b.\"\"\"\n    return a - b\n"
# The request log writes counts with thousands separators and says where cached tokens came from:
# "prompt 11,922 (cached 11,804 from disk)".
# The logging proxy in front of llama-server writes the same shape: "proxy: POST /v1/responses 200 · prompt 8,365 (cached 0)".
LOG_LINE = re.compile(r"(?:specllama serve|proxy): POST (\S+) (\d+)(?: · prompt ([\d,]+) \(cached ([\d,]+)[^)]*\))?")
DRAFTED = re.compile(r"(\d+) \((\d+) accepted\)")
HTTP_ERROR = re.compile(r"(?:error|status)\W{0,3}(?:code\W{0,3})?\b(?:4\d\d|5\d\d)\b[^\n]{0,300}", re.IGNORECASE)


@dataclass
class Row:
    client: str
    version: str
    server: str = "specllama"
    start: str = ""  # "cold" or "warm": the first request's prompt mostly cached (from disk or memory) or not
    finished: bool = False
    edit_applied: bool = False
    seconds: float = 0.0
    requests: int = 0
    failed_requests: int = 0
    abandoned: int = 0  # 499: the client gave up waiting (and retried) before the answer came
    prompt_tokens: int = 0
    cached_tokens: int = 0
    drafted: int = 0
    accepted: int = 0
    verdict: str = ""
    evidence: list[str] = field(default_factory=list)
    request_lines: list[str] = field(default_factory=list)  # the server's log lines for this client's requests


# --- installs ---------------------------------------------------------------------------------------

def install(scratch: Path, clients: list[str]) -> None:
    npm = [f"{NPM[c][0]}@{NPM[c][1]}" for c in clients if c in NPM]
    if npm:
        folder = scratch / "clients"
        folder.mkdir(parents=True, exist_ok=True)
        _run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder), *npm], "npm install")
    for client in clients:
        if client in PIP:
            venv = scratch / f"{client}-venv"
            if not (venv / "bin" / "python").exists():
                _run([sys.executable, "-m", "venv", str(venv)], "venv")
            package, version = PIP[client]
            _run([str(venv / "bin" / "pip"), "install", "-q", f"{package}=={version}"], "pip install")


def _run(cmd: list[str], what: str) -> None:
    print(f"[e2e] {what}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True)


def _bin(scratch: Path, client: str) -> str:
    if client in PIP:
        return str(scratch / f"{client}-venv" / "bin" / PIP_BIN[client])
    name = {"claude": "claude", "codex": "codex", "opencode": "opencode", "qwen": "qwen"}[client]
    return str(scratch / "clients" / "node_modules" / ".bin" / name)


# --- the server -------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_command(args, port: int) -> list[str]:
    if args.server == "llama-server":
        # the same target GGUF, threads and context as serve's; --jinja for the tool-call templates; one slot
        return [str(args.llama_server), "-m", str(args.model), "--host", "127.0.0.1", "--port", str(port), "-c", str(args.ctx),
                "-t", str(args.threads), "--parallel", "1", "--jinja", *args.serve_args]
    return [sys.executable, "-m", "specllama", "serve", "--host", "127.0.0.1", "--port", str(port), "-c", str(args.ctx),
            "--parallel", "1", "-v", *args.serve_args]


def start_serve(args, port: int, log: Path) -> subprocess.Popen:
    cmd = server_command(args, port)
    args.server_command = " ".join(cmd)
    print(f"[e2e] {args.server_command}", file=sys.stderr, flush=True)
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=log.open("ab"), stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    deadline = time.monotonic() + 900  # a first run pulls the models
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(1)
    proc.kill()
    raise SystemExit("serve did not start within 900 s")


# --- one client -------------------------------------------------------------------------------------

def scratch_repo(folder: Path) -> Path:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / "calc.py").write_text(CALC)
    git = ["git", "-c", "user.email=e2e@example.org", "-c", "user.name=e2e"]
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    subprocess.run([*git, "add", "-A"], cwd=folder, check=True)
    subprocess.run([*git, "commit", "-qm", "a calculator with a bug"], cwd=folder, check=True)
    return folder


def client_command(client: str, args, scratch: Path, repo: Path, url: str) -> tuple[list[str], dict]:
    """The command and environment that point `client` at the server (the settings docs/serve.md gives)."""
    home = scratch / f"home-{client}"
    home.mkdir(parents=True, exist_ok=True)
    # PWD too: OpenCode (Bun) takes its project folder from it, not from the working directory
    env = {**os.environ, "HOME": str(home), "PWD": str(repo), "NO_COLOR": "1"}
    exe = _bin(scratch, client)
    if client == "claude":
        # A first prompt's prefill on a small CPU can outlast Claude Code's 600 s per request (API_TIMEOUT_MS)
        # and its 300 s without a byte of the stream (CLAUDE_STREAM_IDLE_TIMEOUT_MS)
        env.update(ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY="local", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                   DISABLE_AUTOUPDATER="1")
        if not args.client_defaults:
            env.update(API_TIMEOUT_MS=str(args.timeout * 1000), CLAUDE_STREAM_IDLE_TIMEOUT_MS=str(args.timeout * 1000))
        if args.idle_limit:
            env.update(CLAUDE_STREAM_IDLE_TIMEOUT_MS=str(args.idle_limit * 1000))
        return [exe, "-p", TASK, "--permission-mode", "acceptEdits", "--allowedTools", "Read,Edit,Write"], env
    if client == "codex":
        codex_home = home / ".codex"
        codex_home.mkdir(exist_ok=True)
        (codex_home / "config.toml").write_text(
            'model = "qwen2.5-coder"\nmodel_provider = "specllama"\n\n[model_providers.specllama]\n'
            f'name = "specllama"\nbase_url = "{url}/v1"\nwire_api = "responses"\nenv_key = "SPECLLAMA_KEY"\n'
            # llama-server sends no event while a long prompt is prefilled: Codex's 300 s idle limit would cut it
            + ("" if args.client_defaults and not args.idle_limit
               else f"stream_idle_timeout_ms = {(args.idle_limit or args.timeout) * 1000}\n"))
        env.update(CODEX_HOME=str(codex_home), SPECLLAMA_KEY="local")
        return [exe, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", TASK], env
    if client == "opencode":
        (repo / "opencode.json").write_text(json.dumps({
            "$schema": "https://opencode.ai/config.json",
            "provider": {"specllama": {"npm": "@ai-sdk/openai-compatible", "name": "specllama",
                                       "options": {"baseURL": f"{url}/v1", "apiKey": "local"},
                                       "models": {"qwen2.5-coder": {"name": "qwen2.5-coder"}}}},
            "model": "specllama/qwen2.5-coder"}, indent=1))
        return [exe, "run", "-m", "specllama/qwen2.5-coder", TASK], env
    if client == "qwen":
        settings = home / ".qwen"
        settings.mkdir(exist_ok=True)
        (settings / "settings.json").write_text(json.dumps({"security": {"auth": {"selectedType": "openai"}}}))
        env.update(OPENAI_API_KEY="local", OPENAI_BASE_URL=f"{url}/v1", OPENAI_MODEL="qwen2.5-coder")
        if not args.client_defaults:
            # its 120 s per request and 240 s without a stream *event* (llama-server sends none during a prefill) end
            # a long prefill and retry (3 times); its 900 s per stream too
            env.update(QWEN_CODE_API_TIMEOUT_MS=str(args.timeout * 1000),
                       QWEN_STREAM_IDLE_TIMEOUT_MS=str(args.timeout * 1000),
                       QWEN_STREAM_MAX_LIFETIME_MS=str(args.timeout * 1000))
        if args.idle_limit:
            env.update(QWEN_STREAM_IDLE_TIMEOUT_MS=str(args.idle_limit * 1000))
        return [exe, "-p", TASK, "--approval-mode", "yolo"], env
    if client == "mini-swe-agent":
        # litellm's OpenAI provider with our base URL; no cost table for a local model (ignore_errors); at most
        # 12 steps, and it exits when the agent submits instead of asking for a next task
        env.update(OPENAI_API_KEY="local", MSWEA_CONFIGURED="true", MSWEA_COST_TRACKING="ignore_errors",
                   MSWEA_SILENT_STARTUP="1")
        return [exe, "-m", "openai/qwen2.5-coder", "-t", TASK, "--yolo", "--exit-immediately", "-c", "mini.yaml",
                "-c", f"model.model_kwargs.api_base={url}/v1", "-c", "agent.step_limit=12", "-c", "agent.cost_limit=0",
                "-o", str(scratch / "mini-swe-agent.traj.json")], env
    if client == "aider":
        return [exe, "--openai-api-base", f"{url}/v1", "--openai-api-key", "local", "--model", "openai/qwen2.5-coder",
                "--yes-always", "--no-auto-commits", "--no-check-update", "--no-show-model-warnings", "--no-analytics",
                "--message", TASK, "calc.py"], env
    raise SystemExit(f"unknown client {client}")


def edit_applied(repo: Path) -> bool:
    check = subprocess.run([sys.executable, "-c", "import calc; assert calc.add(2, 3) == 5 and calc.add(-1, 1) == 0"],
                           cwd=repo, capture_output=True, timeout=30)
    return check.returncode == 0


def run_client(client: str, args, scratch: Path, url: str, serve_log: Path) -> Row:
    version = NPM.get(client, PIP.get(client, ("", "")))[1]
    row = Row(client, version, args.server)
    repo = scratch_repo(scratch / f"repo-{client}")
    cmd, env = client_command(client, args, scratch, repo, url)
    out_path = scratch / f"{client}.out"
    start_at = serve_log.stat().st_size
    print(f"[e2e] {client}: {' '.join(cmd[:2])} ... (timeout {args.timeout} s)", file=sys.stderr, flush=True)
    began = time.monotonic()
    with out_path.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=repo, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 15)
            try:
                rc = proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                rc = proc.wait()
            rc = f"timeout after {args.timeout} s"
    row.seconds = round(time.monotonic() - began, 1)
    row.finished = rc == 0
    row.edit_applied = edit_applied(repo)
    with serve_log.open("rb") as f:
        f.seek(start_at)
        lines = f.read().decode(errors="replace").splitlines()
    for line in lines:
        match = LOG_LINE.search(line)
        if not match:
            continue
        row.requests += 1
        row.request_lines.append(line.strip())  # kept in the report: the next run starts the log file afresh
        if match.group(2) == "499":  # the client left first: its own timeout (a long prefill), then a retry
            row.abandoned += 1
        elif match.group(2) != "200":
            row.failed_requests += 1
            row.evidence.append("serve: " + line.strip())
        if "error in the stream" in line and match.group(2) == "200":
            row.failed_requests += 1
            row.evidence.append("server: " + line.strip()[:400])
        if match.group(3):
            prompt, cached = int(match.group(3).replace(",", "")), int(match.group(4).replace(",", ""))
            row.start = row.start or ("warm" if cached >= prompt / 2 else "cold")  # the first request's
            row.prompt_tokens += prompt
            row.cached_tokens += cached
        for drafted, accepted in DRAFTED.findall(line):  # "drafted suffix 40 (31 accepted), model 12 (7 accepted)"
            row.drafted += int(drafted)
            row.accepted += int(accepted)
    client_out = out_path.read_text(errors="replace")
    client_errors = [m.group(0).strip() for m in HTTP_ERROR.finditer(client_out)][:3]
    # serve's traceback, or llama-server's error lines (its log goes to the same file)
    traceback = any("Traceback" in line or " E " in line[:30] or "error:" in line[:60] for line in lines)
    if any("prompt is too long" in e for e in client_errors):
        row.verdict = "context too small: raise -c"
        row.evidence += [f"client: {e}" for e in client_errors]
    elif row.failed_requests or traceback or client_errors:
        row.verdict = "server failed"
        row.evidence += [f"client: {e}" for e in client_errors] + (["serve: a traceback in its log"] if traceback else [])
    elif row.abandoned and not row.requests - row.abandoned:
        row.verdict = "client gave up on every request (its own timeout) before an answer"
    elif row.edit_applied:
        row.verdict = "ok" if row.finished else f"edit applied, client ended with {rc}"
    elif row.requests == 0 and isinstance(rc, str):  # nothing answered nor left before the end: a prefill still running
        row.verdict = "no request answered within the timeout"
        row.evidence.append("client: " + client_out.strip()[-400:].replace("\n", "\\n"))
    elif row.requests == 0:
        row.verdict = "client never reached the server"
        row.evidence.append("client: " + client_out.strip()[-400:])
    else:
        row.verdict = "model answered badly (every request 200, no correct edit)"
        row.evidence.append("calc.py now: " + (repo / "calc.py").read_text()[-300:].replace("\n", "\\n"))
        row.evidence.append("client: " + client_out.strip()[-400:].replace("\n", "\\n"))
    if not row.finished and rc != 0:
        row.evidence.append(f"client exit: {rc}")
    if row.abandoned:
        row.evidence.append(f"serve: {row.abandoned} request(s) left by the client before the answer (its timeout)")
    return row


def table(rows: list[Row]) -> str:
    head = ("| client | version | server | start | finished | edit applied | seconds | requests (failed, left) "
            "| prompt tokens (cached) | drafted (accepted) | verdict |\n|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [f"| {r.client} | {r.version} | {r.server} | {r.start or '-'} | {'yes' if r.finished else 'no'} | "
             f"{'yes' if r.edit_applied else 'no'} | "
             f"{r.seconds:.0f} | {r.requests} ({r.failed_requests}, {r.abandoned}) | {r.prompt_tokens} ({r.cached_tokens}) | "
             f"{r.drafted} ({r.accepted}) | {r.verdict} |" for r in rows]
    return "\n".join([head, *lines])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", default="claude,codex,opencode,qwen,aider")
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/specllama-agents-e2e"))
    parser.add_argument("--ctx", type=int, default=32768, help="serve's -c (Claude Code's prompt alone is ~11.5k)")
    parser.add_argument("--server", choices=["specllama", "llama-server"], default="specllama")
    parser.add_argument("--llama-server", type=Path, help="llama.cpp's llama-server binary (with --server llama-server)")
    parser.add_argument("--model", type=Path, default=TARGET_GGUF, help="the GGUF llama-server loads")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="llama-server's -t (serve's default: all cores)")
    parser.add_argument("--report", type=Path, help="where the JSON report goes (default: SCRATCH/report.json)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds each client may take")
    parser.add_argument("--no-install", action="store_true", help="use the clients already in --scratch")
    parser.add_argument("--client-defaults", action="store_true",
                        help="leave the clients' own time limits as they ship (default: raised to --timeout)")
    parser.add_argument("--idle-limit", type=int, metavar="SECONDS",
                        help="set the clients' limit on a stream without an event this low (Codex, Qwen Code, Claude "
                             "Code): a cold prefill longer than it passes only if the server's keep-alives count")
    parser.add_argument("--url", help="a serve already running (its log: --serve-log); none is started")
    parser.add_argument("--serve-log", type=Path, help="with --url: that server's stderr, for the request lines")
    parser.add_argument("serve_args", nargs="*", help="more options for serve (after --), e.g. -- --target X")
    args = parser.parse_args()
    clients = [c for c in args.clients.split(",") if c]
    unknown = set(clients) - set(NPM) - set(PIP)
    if unknown:
        parser.error(f"unknown clients: {', '.join(sorted(unknown))}")
    if args.server == "llama-server" and not (args.llama_server and args.llama_server.is_file()):
        parser.error("--server llama-server needs --llama-server PATH (llama.cpp's build/bin/llama-server)")
    args.scratch.mkdir(parents=True, exist_ok=True)
    if not args.no_install:
        install(args.scratch, clients)
    proc = None
    if args.url:
        url, serve_log = args.url.rstrip("/"), args.serve_log
        if serve_log is None:
            parser.error("--url needs --serve-log")
    else:
        port = free_port()
        serve_log = args.scratch / f"{args.server}.log"
        serve_log.write_bytes(b"")
        proc = start_serve(args, port, serve_log)
        url = f"http://127.0.0.1:{port}"
        if args.server == "llama-server":
            proxy, proxy_port = logging_proxy.start(port, serve_log)
            url = f"http://127.0.0.1:{proxy_port}"
    rows = []
    try:
        for client in clients:
            rows.append(run_client(client, args, args.scratch, url, serve_log))
            print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
            write_report(args, rows)  # after each client: a run stopped later keeps the rows it has
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=60)
    report = table(rows)
    print(report)
    for row in rows:
        for line in row.evidence:
            print(f"- {row.client}: {line}")
    return 0


def server_version(args) -> str:
    if args.server == "llama-server":
        out = subprocess.run([str(args.llama_server), "--version"], capture_output=True, text=True).stderr
        return " ".join(line for line in out.splitlines() if line.startswith("version"))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout
    return f"specllama {commit.strip()}"


def write_report(args, rows: list[Row]) -> None:
    meta = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "server_command": getattr(args, "server_command", ""),
            "server": args.server, "ctx": args.ctx, "timeout_s": args.timeout, "client_defaults": args.client_defaults,
            "idle_limit_s": args.idle_limit,
            "finished_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "prompt_cache": os.environ.get("SPECLLAMA_PROMPT_CACHE", "~/.cache/specllama/prompt-cache")}
    meta["server_version"] = server_version(args)
    report_path = args.report or args.scratch / "report.json"
    report_path.write_text(json.dumps({"meta": meta, "rows": [asdict(r) for r in rows]}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
