"""A small Hugging Face hub on 127.0.0.1, enough for huggingface_hub's downloads and file listing:
`/{repo}/resolve/{revision}/{file}` (HEAD and GET, with Range, ETag and X-Repo-Commit) and
`/api/models/{repo}/tree/{revision}`. Point HF_ENDPOINT at `.url`. It records every request, can
require a token for a repository (private), and can cut a download short once (to test resuming)."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class Seen:
    method: str
    path: str
    range: str | None
    authorization: str | None
    bytes_sent: int = 0


@dataclass
class FakeHub:
    repos: dict[str, dict[str, Path]] = field(default_factory=dict)  # repo -> file name -> file on disk
    tokens: dict[str, str] = field(default_factory=dict)  # repo -> the token it requires (private)
    cut_after: dict[str, int] = field(default_factory=dict)  # file name -> bytes sent before the first GET is cut
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_HEAD(self):
                hub._serve(self, body=False)

            def do_GET(self):
                hub._serve(self, body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def bytes_sent(self, name: str) -> int:
        return sum(s.bytes_sent for s in self.seen if s.path.endswith("/" + name))

    # --- answers ---------------------------------------------------------------------------------------------

    def _serve(self, h: BaseHTTPRequestHandler, body: bool) -> None:
        path = unquote(urlsplit(h.path).path)
        seen = Seen(h.command, path, h.headers.get("Range"), h.headers.get("Authorization"))
        self.seen.append(seen)
        tree = re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)", path)
        resolve = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        repo = (tree or resolve).group(1) if (tree or resolve) else None
        if repo not in self.repos or (repo in self.tokens and seen.authorization != f"Bearer {self.tokens[repo]}"):
            return self._send(h, 401 if repo in self.tokens else 404, {"X-Error-Code": "RepoNotFound"},
                              b'{"error": "Repository not found"}', body)
        if tree:
            listing = [{"type": "file", "path": name, "size": file.stat().st_size,
                        "oid": hashlib.sha1(name.encode()).hexdigest()} for name, file in self.repos[repo].items()]
            return self._send(h, 200, {"Content-Type": "application/json"}, json.dumps(listing).encode(), body)
        name = resolve.group(3)
        if name not in self.repos[repo]:
            return self._send(h, 404, {"X-Error-Code": "EntryNotFound"}, b'{"error": "Entry not found"}', body)
        data = self.repos[repo][name].read_bytes()
        start, end = 0, len(data) - 1
        status = 200
        if seen.range and (m := re.fullmatch(r"bytes=(\d+)-(\d*)", seen.range)):
            start, end = int(m.group(1)), min(int(m.group(2) or end), end)
            status = 206
        headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{hashlib.sha256(data).hexdigest()}"', "Accept-Ranges": "bytes"}
        if status == 206:
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
        chunk = data[start:end + 1]
        cut = self.cut_after.pop(name, None) if body and h.command == "GET" else None
        if cut is not None:  # promise the whole chunk, send part of it, hang up: a dropped connection
            h.send_response(status)
            for k, v in {**headers, "Content-Length": str(len(chunk))}.items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(chunk[:cut])
            h.wfile.flush()
            seen.bytes_sent = cut
            h.close_connection = True
            return
        seen.bytes_sent = len(chunk) if body else 0
        self._send(h, status, headers, chunk, body)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, headers: dict, data: bytes, body: bool) -> None:
        h.send_response(status)
        for k, v in {**headers, "Content-Length": str(len(data))}.items():
            h.send_header(k, v)
        h.end_headers()
        if body:
            h.wfile.write(data)
