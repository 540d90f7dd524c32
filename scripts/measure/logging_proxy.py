"""A pass-through HTTP proxy that writes one line per request, for servers that log none (llama-server does
not log requests: its request logger is commented out). agents_e2e.py puts it in front of llama-server so
that both servers' rows count requests, statuses and prompt tokens the same way.

Each answer is relayed chunk by chunk as it arrives (an SSE stream stays a stream); the line it writes is

    proxy: POST /v1/chat/completions 200 · prompt 8,365 (cached 0) · 1.2 s
    proxy: POST /v1/responses 400 · {"error": {"message": "...

with the prompt and cached counts read from the answer's own usage/timings fields (the last ones in it),
and the first 300 characters of the body when the status is not 2xx: the evidence for "the server failed".
"""

from __future__ import annotations

import http.client
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# llama-server's "timings" (prompt_n = tokens evaluated, cache_n = tokens reused) and the APIs' usage fields
PROMPT_N = re.compile(rb'"prompt_n"\s*:\s*(\d+)')
CACHE_N = re.compile(rb'"cache_n"\s*:\s*(\d+)')
USAGE_PROMPT = re.compile(rb'"(?:prompt_tokens|input_tokens)"\s*:\s*(\d+)')
USAGE_CACHED = re.compile(rb'"(?:cached_tokens|cache_read_input_tokens)"\s*:\s*(\d+)')
STREAM_ERROR = re.compile(rb'"error"\s*:\s*\{')
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection", "host",
       "content-length"}


def _last(pattern: re.Pattern, data: bytes) -> int | None:
    found = pattern.findall(data)
    return int(found[-1]) if found else None


def prompt_counts(body: bytes) -> tuple[int, int] | None:
    """(prompt tokens, of which cached) from an answer, or None when it names none."""
    prompt_n, cache_n = _last(PROMPT_N, body), _last(CACHE_N, body)
    if prompt_n is not None and cache_n is not None:
        return prompt_n + cache_n, cache_n
    prompt = _last(USAGE_PROMPT, body)
    if prompt is None:
        return None
    cached = _last(USAGE_CACHED, body) or 0
    if b'"cache_read_input_tokens"' in body:  # Anthropic's input_tokens leaves out the tokens read from the cache
        prompt += cached
    return prompt, cached


def start(upstream_port: int, log: Path) -> tuple[ThreadingHTTPServer, int]:
    lock = threading.Lock()

    def write(line: str) -> None:
        with lock, log.open("a") as f:
            f.write(line + "\n")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # the one line per request below is the log
            pass

        def _relay(self) -> None:
            began = time.monotonic()
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
            upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=3600)
            tail = b""
            try:
                upstream.request(self.command, self.path, body=body, headers=headers)
                answer = upstream.getresponse()
                self.send_response(answer.status, answer.reason)
                for key, value in answer.getheaders():
                    if key.lower() not in HOP:
                        self.send_header(key, value)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                while chunk := answer.read1(65536):
                    tail = (tail + chunk)[-262144:]  # usage and timings come at the end
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                status = answer.status
            except (BrokenPipeError, ConnectionResetError):
                status = 499  # the client left before the answer was complete, as serve's log says it
            except OSError as e:
                status = 502
                tail = str(e).encode()
            finally:
                upstream.close()
            line = f"proxy: {self.command} {self.path.split('?')[0]} {status}"
            counts = prompt_counts(tail)
            if counts:
                line += f" · prompt {counts[0]:,} (cached {counts[1]:,})"
            line += f" · {time.monotonic() - began:.1f} s"
            if not 200 <= status < 300:
                line += " · " + tail[:300].decode(errors="replace").replace("\n", " ")
            elif error := STREAM_ERROR.search(tail):  # a stream that began 200 and then carried an error event
                line += " · error in the stream: " + tail[error.start():error.start() + 300].decode(errors="replace")
            if not self.path.split("?")[0].endswith(("/health", "/models")):
                write(line)

        do_GET = do_POST = do_PUT = do_DELETE = _relay

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]
