"""A tiny OpenAI-compatible server on 127.0.0.1 for testing the client: each POST to
/v1/chat/completions is answered by a `responder(body, n)` (n: how many chat requests came before),
which returns (status, headers, body bytes). The default answers like llama-server with a draft model."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

Responder = Callable[[dict, int], tuple[int, dict, bytes]]


def echo_reply(body: dict, n: int = 0) -> tuple[int, dict, bytes]:
    prompt = body["messages"][-1]["content"]
    reply = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": f"echo: {prompt}"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12},
        "timings": {"predicted_n": 5, "predicted_per_second": 50.0, "draft_n": 8, "draft_n_accepted": 6},
    }
    return 200, {}, json.dumps(reply).encode()


class FakeServer:
    def __init__(self, responder: Responder = echo_reply, *, models: list[str] | None = None,
                 props: dict | None = None):
        self.responder = responder
        self.models = models
        self.props = props
        self.chat_requests: list[dict] = []
        self.headers_seen: list[dict] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
            # Headers and body go out in two writes: without this, Nagle's algorithm holds the body
            # until the client's delayed ACK (~40 ms), and the fake would measure that, not the client.
            disable_nagle_algorithm = True

            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                if self.path == "/v1/models" and fake.models is not None:
                    self._send(200, {}, json.dumps({"data": [{"id": m} for m in fake.models]}).encode())
                elif self.path == "/props" and fake.props is not None:
                    self._send(200, {}, json.dumps(fake.props).encode())
                else:
                    self._send(404, {}, b'{"error": "not found"}')

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake._lock:
                    n = len(fake.chat_requests)
                    fake.chat_requests.append(body)
                    fake.headers_seen.append(dict(self.headers))
                self._send(*fake.responder(body, n))

            def _send(self, status: int, headers: dict, data: bytes):
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> "FakeServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)
