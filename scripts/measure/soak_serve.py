"""Soak `specllama serve` (issue 33): many requests from several clients, mixing what real and
hostile clients do, against one server with `--parallel 2`, then check that nothing was lost.

Each of the REQUESTS requests is one of (a seeded schedule, the same every run):
  whole        a greedy chat, answered whole: its text must equal `specllama run --exact`'s
  stream       the same, streamed: the joined chunks must equal it and end with [DONE]
  cancel       a stream closed by its client after a few chunks
  disconnect   a whole request whose client closes its socket before the answer
  completion   a raw /v1/completions prompt, greedy (200 with text)
  malformed    bad JSON, nested too deep, a wrong field: 400 with OpenAI's error JSON
  oversized    a body over --max-body: 413
  overbudget   a chat far longer than the context holds, under --max-body: 400 before tokenizing
  badschema    a response_format or tool schema the grammar engine cannot finish (issue 41: a recursive
               schema with no finite instance, an anyOf of 2,001 branches): 400 naming why, engine alive
  mutated      a well-formed body of /v1/chat/completions, /v1/messages or /v1/responses with one value
               replaced by one of another JSON type (issue 41): a 200, or a 4xx in that API's error shape

At the end: every well-formed answer correct, /health reports no request active or queued (no
slot leaked), the server's RSS grew less than 10 % from after the warm-up, /health says "ok", it still answers a chat
correctly, and SIGTERM stops it with exit 0. Not part of the test suite (minutes of CPU); run it
under the heavy-work lock and keep its report:

  flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/soak_serve.py --out bench/measured/NAME

`--target` also takes a GGUF path (the test suite's tiny models: a short soak in seconds).
"""

from __future__ import annotations

import argparse
import copy
import http.client
import json
import os
import platform
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from specllama.llama.machine import cpu_model  # noqa: E402
from specllama.models import store  # noqa: E402
from specllama.models.registry import load_registry  # noqa: E402

PROMPTS = ["Write a Python function that reverses a string.", "What is the capital of France?",
           "List three prime numbers.", "Explain what a hash map is in one sentence.",
           "Write a haiku about the sea.", "def fibonacci(n):"]
KINDS = {"whole": 30, "stream": 20, "cancel": 10, "disconnect": 10, "completion": 8, "malformed": 10,
         "oversized": 6, "overbudget": 6, "badschema": 8, "mutated": 20}
SELF_NEXT = {"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]}
BAD_SCHEMAS = [  # issue 41's: each killed the engine at decode time
    {"$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}, "minItems": 1}}, "$ref": "#/$defs/a"},
    SELF_NEXT,
    {"$defs": {"a": {"type": "object", "properties": {"b": {"$ref": "#/$defs/b"}}, "required": ["b"]},
               "b": {"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "required": ["a"]}}, "$ref": "#/$defs/a"},
    {"anyOf": [{"type": "object", "properties": {f"k{i}": {"type": "integer"}}, "required": [f"k{i}"]} for i in range(2001)]},
]
MUTABLE = {  # well-formed bodies (issue 41's type mutation): one value is replaced by one of another type
    "/v1/chat/completions": {"model": "MODEL", "max_tokens": 2, "temperature": 0, "stop": ["x"], "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}], "tool_choice": "none"},
    "/v1/messages": {"model": "MODEL", "max_tokens": 2, "temperature": 0, "system": [{"type": "text", "text": "s"}],
                     "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "stop_sequences": ["x"]},
    "/v1/responses": {"model": "MODEL", "max_output_tokens": 2, "temperature": 0, "instructions": "s",
                      "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]},
}
OTHER_TYPES = [None, True, 0, 5, -1, 2.5, "", "x", [], [1], {}, {"type": "text"}, [{"type": "text", "text": 5}]]
MALFORMED = [b"{not json", b"[" * 50_000, b'{"model": "MODEL", "messages": "hi"}', b'{"model": "MODEL"}',
             b'{"model": "MODEL", "messages": [{"role": "wizard", "content": "x"}]}', b"[1, 2]",
             b'{"model": "MODEL", "messages": [{"role": "user", "content": "x"}], "max_tokens": "ten"}']


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def reference_texts(target: Path, args) -> dict[str, str]:
    """`specllama run --exact`'s greedy text for each prompt: what every answer must equal."""
    out = {}
    for prompt in PROMPTS:
        proc = subprocess.run([sys.executable, "-m", "specllama", "run", "--target", str(target), "--no-draft",
                               "--exact", "--ctx", str(args.ctx), "-n", str(args.max_tokens), "--temp", "0",
                               "--json", prompt], cwd=REPO, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=600)
        if proc.returncode != 0:
            raise SystemExit(f"run --exact failed: {proc.stderr[-2000:]}")
        out[prompt] = json.loads(proc.stdout)["text"]
    return out


class Soak:
    def __init__(self, port: int, model: str, refs: dict[str, str], args):
        self.port, self.model, self.refs, self.args = port, model, refs, args
        self.outcomes: Counter = Counter()
        self.problems: list[str] = []
        self.lock = threading.Lock()

    def note(self, kind: str, ok: bool, why: str = "") -> None:
        with self.lock:
            self.outcomes[(kind, "ok" if ok else "bad")] += 1
            if not ok:
                self.problems.append(f"{kind}: {why}")

    def conn(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        conn = self.conn()
        try:
            conn.request("POST", path, body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def chat(self, prompt: str, **fields) -> bytes:
        return json.dumps({"model": self.model, "messages": [{"role": "user", "content": prompt}],
                           "max_tokens": self.args.max_tokens, "temperature": 0, **fields}).encode()

    def one(self, kind: str, rng: random.Random) -> None:
        prompt = rng.choice(PROMPTS)
        try:
            getattr(self, "do_" + kind)(prompt, rng)
        except Exception as e:  # noqa: BLE001 - every surprise is a finding, reported
            self.note(kind, False, f"{type(e).__name__}: {e}")

    def do_whole(self, prompt: str, rng) -> None:
        status, data = self.post("/v1/chat/completions", self.chat(prompt))
        text = json.loads(data)["choices"][0]["message"]["content"] if status == 200 else None
        self.note("whole", status == 200 and text == self.refs[prompt], f"{status} {data[:200]!r}")

    def do_stream(self, prompt: str, rng) -> None:
        status, data = self.post("/v1/chat/completions", self.chat(prompt, stream=True))
        events = [e[len("data: "):] for e in data.decode().split("\n\n") if e.startswith("data: ")]
        text = "".join(json.loads(e)["choices"][0]["delta"].get("content") or "" for e in events[:-1]
                       if json.loads(e).get("choices"))
        ok = status == 200 and events and events[-1] == "[DONE]" and text == self.refs[prompt]
        self.note("stream", ok, f"{status} {text!r} vs {self.refs[prompt]!r}")

    def do_cancel(self, prompt: str, rng) -> None:
        conn = self.conn()
        conn.request("POST", "/v1/chat/completions", self.chat(prompt, stream=True, max_tokens=512),
                     {"Content-Type": "application/json"})
        response = conn.getresponse()
        for _ in range(rng.randint(1, 4)):
            response.readline()
        conn.close()
        self.note("cancel", response.status == 200, str(response.status))

    def do_disconnect(self, prompt: str, rng) -> None:
        body = self.chat(prompt, max_tokens=512)
        with socket.create_connection(("127.0.0.1", self.port)) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            time.sleep(rng.uniform(0.0, 0.5))
        self.note("disconnect", True)

    def do_completion(self, prompt: str, rng) -> None:
        body = json.dumps({"model": self.model, "prompt": prompt, "max_tokens": 8, "temperature": 0}).encode()
        status, data = self.post("/v1/completions", body)
        self.note("completion", status == 200 and isinstance(json.loads(data)["choices"][0]["text"], str), str(status))

    def do_malformed(self, prompt: str, rng) -> None:
        status, data = self.post("/v1/chat/completions", rng.choice(MALFORMED).replace(b"MODEL", self.model.encode()))
        self.note("malformed", status == 400 and "message" in json.loads(data)["error"], f"{status} {data[:200]!r}")

    def do_oversized(self, prompt: str, rng) -> None:
        status, data = self.post("/v1/chat/completions", self.chat("x" * (self.args.max_body + 1000)))
        self.note("oversized", status == 413, f"{status} {data[:200]!r}")

    def do_badschema(self, prompt: str, rng, schema: dict | None = None, tool: bool | None = None) -> None:
        schema = schema or rng.choice(BAD_SCHEMAS)
        tool = rng.random() < 0.5 if tool is None else tool
        if not tool or len(json.dumps(schema)) > 10_000:  # a huge tool list would not fit the prompt: a 400 for that
            fields = {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}
        else:
            fields = {"tools": [{"type": "function", "function": {"name": "walk", "parameters": schema}}],
                      "tool_choice": "required"}
        status, data = self.post("/v1/chat/completions", self.chat(prompt, **fields))
        message = json.loads(data)["error"]["message"] if status == 400 else ""
        ok = status == 400 and ("no finite instance" in message or "limit" in message)
        self.note("badschema", ok, f"{status} {data[:200]!r}")

    def do_mutated(self, prompt: str, rng) -> None:
        route = rng.choice(sorted(MUTABLE))
        body = json.loads(json.dumps(MUTABLE[route]).replace("MODEL", self.model))
        places = list(_places(body))
        parent, key = rng.choice(places)
        old = parent[key]
        parent[key] = rng.choice([v for v in OTHER_TYPES if _kind(v) != _kind(old)])
        status, data = self.post(route, json.dumps(copy.deepcopy(body)).encode())
        ok = status < 500
        if ok and status != 200:
            answer = json.loads(data)
            ok = answer.get("type") == "error" if route == "/v1/messages" else isinstance(answer.get("error"), dict)
        self.note("mutated", ok, f"{route} {json.dumps(body)[:200]} -> {status} {data[:200]!r}")

    def do_overbudget(self, prompt: str, rng) -> None:
        content = "<|im_end|>x" * ((self.args.max_body - 1000) // 11)
        status, data = self.post("/v1/chat/completions", self.chat(content))
        ok = status == 400 and json.loads(data)["error"]["code"] == "context_length_exceeded"
        self.note("overbudget", ok, f"{status} {data[:200]!r}")


def _places(value):
    """(container, key) for every value inside a body."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        yield value, key
        yield from _places(item)


def _kind(value) -> str:
    return "number" if isinstance(value, (int, float)) and not isinstance(value, bool) else type(value).__name__


def get_json(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default="smollm2-135m", help="a registry name or a GGUF path (default smollm2-135m)")
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--parallel", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=24)
    p.add_argument("--ctx", type=int, default=2048)
    p.add_argument("--max-body", type=int, default=1 << 20)
    p.add_argument("--seed", type=int, default=33)
    p.add_argument("--out", help="write OUT.json and OUT.md (bench/measured/NAME)")
    args = p.parse_args()

    registry = load_registry()
    target = Path(args.target) if Path(args.target).exists() else store.ensure(registry.model(args.target))
    print(f"references: run --exact on {target.name} for {len(PROMPTS)} prompts", file=sys.stderr)
    refs = reference_texts(target, args)

    port = free_port()
    log = Path(f"/tmp/soak-serve-{port}.log")
    cmd = [sys.executable, "-m", "specllama", "serve", "--target", str(target), "--no-draft", "--exact",
           "--ctx", str(args.ctx), "--parallel", str(args.parallel), "--max-body", str(args.max_body),
           "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.DEVNULL,
                              stderr=log.open("wb"))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while True:
        try:
            model = get_json(url + "/v1/models")[1]["data"][0]["id"]
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"serve did not start: {log.read_text()[-2000:]}")
            time.sleep(0.2)
    soak = Soak(port, model, refs, args)
    for prompt in PROMPTS:  # warm-up: caches, allocator, the first decodes
        soak.do_whole(prompt, None)
    # ... and the grammar engine's largest compile (the 2,001-branch anyOf: about 100 MB held by the
    # allocator afterwards on a 150k vocabulary, a plateau, not a leak), on both preparing threads at once
    warm = [threading.Thread(target=soak.do_badschema, args=(PROMPTS[0], random.Random(0), schema, False))
            for schema in BAD_SCHEMAS * 2]
    for t in warm:
        t.start()
    for t in warm:
        t.join()
    warmup_problems = list(soak.problems)
    soak.outcomes.clear()
    rss_start = rss_kib(server.pid)

    rng = random.Random(args.seed)
    schedule = rng.choices(list(KINDS), weights=list(KINDS.values()), k=args.requests)
    seeds = [rng.randrange(2**32) for _ in schedule]
    todo = list(zip(schedule, seeds))
    lock = threading.Lock()

    def client() -> None:
        while True:
            with lock:
                if not todo:
                    return
                kind, seed = todo.pop(0)
            soak.one(kind, random.Random(seed))

    started = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started

    health = {}
    for _ in range(100):  # cancels and disconnects end after their current step
        status, health = get_json(url + "/health")
        if status == 200 and health.get("status") == "ok" and health.get("active") == 0 and health.get("queued") == 0:
            break
        time.sleep(0.1)
    rss_end = rss_kib(server.pid)
    final_ok = soak.post("/v1/chat/completions", soak.chat(PROMPTS[0]))
    final_ok = final_ok[0] == 200 and json.loads(final_ok[1])["choices"][0]["message"]["content"] == refs[PROMPTS[0]]
    stop_started = time.monotonic()
    server.send_signal(signal.SIGTERM)
    returncode = server.wait(timeout=60)
    stop_seconds = time.monotonic() - stop_started
    stderr = log.read_text(errors="replace")

    kinds = sorted({k for k, _ in soak.outcomes})
    result = {
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "system": platform.platform()},
        "command": " ".join(cmd[3:]), "target": target.name, "requests": args.requests, "clients": args.clients,
        "parallel": args.parallel, "max_tokens": args.max_tokens, "seed": args.seed, "wall_s": round(wall, 1),
        "outcomes": {k: {"ok": soak.outcomes[(k, "ok")], "bad": soak.outcomes[(k, "bad")]} for k in kinds},
        "problems": soak.problems[:50], "warmup_problems": warmup_problems,
        "health_at_end": health, "rss_start_kib": rss_start, "rss_end_kib": rss_end,
        "rss_growth_pct": round(100 * (rss_end - rss_start) / rss_start, 2), "still_answering": final_ok,
        "sigterm_exit": returncode, "sigterm_seconds": round(stop_seconds, 2),
        "tracebacks_in_log": stderr.count("Traceback"),
    }
    passed = (not soak.problems and not warmup_problems and health.get("status") == "ok" and health.get("active") == 0
              and health.get("queued") == 0
              and result["rss_growth_pct"] < 10 and final_ok and returncode == 0 and not result["tracebacks_in_log"])
    result["passed"] = passed
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out + ".json").write_text(json.dumps(result, indent=2) + "\n")
        rows = "\n".join(f"| {k} | {v['ok']} | {v['bad']} |" for k, v in result["outcomes"].items())
        title = f"serve soak: {args.requests} requests, {args.clients} clients, --parallel {args.parallel}"
        Path(args.out + ".md").write_text(f"""# {title}

Command: `flock /tmp/specllama-heavy.lock .venv/bin/python scripts/measure/soak_serve.py --out {args.out}`
Machine: {result['machine']['cpu']}, {result['machine']['cores']} cores, {result['machine']['system']}.
Server: `specllama {result['command']}` ({target.name}, greedy, max_tokens {args.max_tokens}); references from
`specllama run --exact` with the same model, context and max tokens. Wall time {result['wall_s']} s.

| kind | as expected | not |
|---|---|---|
{rows}

- problems: {len(soak.problems)}{': ' + '; '.join(soak.problems[:5]) if soak.problems else ''}
- /health at the end: {json.dumps(health)}
- RSS after the warm-up {rss_start / 1024:.1f} MiB, at the end {rss_end / 1024:.1f} MiB: {result['rss_growth_pct']:+.2f} %
- still answering (a greedy chat equal to run --exact): {final_ok}
- SIGTERM: exit {returncode} after {stop_seconds:.2f} s; tracebacks in the server's log: {result['tracebacks_in_log']}
- verdict: {'passed' if passed else 'FAILED'}
""")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
