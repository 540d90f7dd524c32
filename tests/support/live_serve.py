"""A real `specllama serve` subprocess on 127.0.0.1 for the server's tests, and the official
`openai` client pointed at it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """`specllama serve ARGS` on a free port; `stop()` sends a signal and returns the exit status."""

    def __init__(self, args: list[str], log: Path, *, api_key: str | None = None, env: dict | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_key = api_key
        self.log = log
        cmd = [sys.executable, "-m", "specllama", "serve", "--host", "127.0.0.1", "--port", str(self.port), *args]
        if api_key:
            cmd += ["--api-key", api_key]
        # Each server its own prompt-cache folder (one test's entries never serve another's), unless
        # `env` names one (a restart that must find the last server's).
        own_cache = {"SPECLLAMA_PROMPT_CACHE": str(log.parent / f"prompt-cache-{self.port}")}
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=log.open("wb"),
                                     env={**os.environ, "PYTHONPATH": str(REPO), **own_cache, **(env or {})})
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited with {self.proc.returncode}: {self.stderr()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        self.proc.kill()
        raise AssertionError(f"serve did not answer within {START_TIMEOUT} s: {self.stderr()[-3000:]}")

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def client(self, **kwargs):
        import openai

        return openai.OpenAI(base_url=self.url + "/v1", api_key=self.api_key or "none", max_retries=0, **kwargs)

    def async_client(self, **kwargs):
        import openai

        return openai.AsyncOpenAI(base_url=self.url + "/v1", api_key=self.api_key or "none", max_retries=0, **kwargs)

    def get(self, path: str) -> tuple[int, dict, bytes]:
        return self.request("GET", path)

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
                auth: bool = True) -> tuple[int, dict, bytes]:
        """Raw HTTP, for what the openai client will not send (malformed bodies)."""
        all_headers = {"Content-Type": "application/json", **(headers or {})}
        if auth and self.api_key:
            all_headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=all_headers)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
        except urllib.error.HTTPError as e:
            return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()

    def metrics(self) -> dict[str, float]:
        """/metrics as {'name{labels}': value}."""
        status, _, data = self.get("/metrics")
        assert status == 200
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError(f"serve did not stop within {timeout} s of signal {sig}")


def anthropic_prompt_tokens(usage) -> int:
    """A prompt's size over Anthropic's API: its usage.input_tokens leave out what the prompt cache gave
    (cache_read_input_tokens), which the server always reports."""
    return usage.input_tokens + usage.cache_read_input_tokens


def chat_body(model: str, content: str, **fields) -> bytes:
    return json.dumps({"model": model, "messages": [{"role": "user", "content": content}], **fields}).encode()


def wait_for(predicate, timeout: float = 10.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def outcomes(live: LiveServer) -> dict[str, float]:
    return {k.split('"')[1]: v for k, v in live.metrics().items() if k.startswith("specllama_requests_total{")}
