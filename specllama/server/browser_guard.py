"""What a web page may do with the server (issue 41): a browser protects a local API from pages of
other sites only partly, so the server checks two headers itself, as llama-server and Ollama do.

- Origin: a page may POST a `text/plain` body to any address without a CORS preflight (a "simple
  request"); the browser hides the answer from the page but the generation still runs. So a
  request that carries an Origin which is not allowed (pages on this machine, `--cors` origins, or
  the server's own origin) is refused with 403 whatever its method or content type.
- Host: DNS rebinding points a name the attacker controls at 127.0.0.1; the page is then
  "same-origin" with the server and may read its answers. The Host header still carries the
  attacker's name, so a server listening on a loopback address answers only Host names of this
  machine (localhost, 127.0.0.1, [::1]) and those given with `--allow-host` (repeatable; "*":
  any). A server listening on another address names that address as well; one listening on every
  interface (0.0.0.0, ::) was asked to be reached under any name and checks no Host (as Ollama).
/health and /v1/health are answered whatever the headers (load balancers probe them).
"""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Iterable

LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
OPEN_PATHS = ("/health", "/v1/health")
ANTHROPIC_PATHS = ("/v1/messages",)


def allowed_hosts(listen: str, extra: Iterable[str] = ()) -> frozenset[str] | None:
    """The Host names (lower case, no port) the server answers; None: any."""
    extra = [h.strip().lower().strip("[]") for h in extra if h.strip()]
    if "*" in extra or listen in ("0.0.0.0", "::", ""):
        return None
    return frozenset([*LOCAL_NAMES, listen.lower().strip("[]"), *extra])


def host_name(host: str) -> str:
    """`name:port`, `[v6]:port` or a bare name / address, as the name alone (lower case)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    if host.count(":") > 1:  # a bare IPv6 address
        return host
    return host.rsplit(":", 1)[0] if ":" in host else host


def _is_loopback(name: str) -> bool:
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return name == "localhost" or name.endswith(".localhost")


class BrowserGuard:
    """ASGI middleware: 403 for a disallowed Origin or Host (see the module docstring)."""

    def __init__(self, app, hosts: frozenset[str] | None, origins: tuple[str, ...], local_origins: str):
        self.app = app
        self.hosts = hosts
        self.any_origin = "*" in origins
        self.origins = frozenset(o.rstrip("/").lower() for o in origins)
        self.local = re.compile(local_origins)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1")
        origin = headers.get(b"origin", b"").decode("latin-1").rstrip("/").lower()
        why = None
        if self.hosts is not None and host and host_name(host) not in self.hosts and not _is_loopback(host_name(host)):
            why = (f"the Host '{host_name(host)}' is not one this server answers (a DNS-rebinding guard): start it with "
                   "--allow-host NAME to allow that name")
        elif origin and scope["method"] != "OPTIONS" and not self._origin_ok(origin, host):  # a preflight runs nothing
            why = (f"requests from web pages of {origin} are not allowed: start the server with --cors {origin} to "
                   "allow them")
        if why is None:
            await self.app(scope, receive, send)
            return
        await _forbidden(scope["path"], why, send)

    def _origin_ok(self, origin: str, host: str) -> bool:
        if self.any_origin or origin in self.origins or self.local.fullmatch(origin):
            return True
        # the server's own origin (a page it would serve itself, same host and port)
        return origin.split("://", 1)[-1] == host.strip().lower()


async def _forbidden(path: str, message: str, send) -> None:
    if path.startswith(ANTHROPIC_PATHS):
        body = {"type": "error", "error": {"type": "permission_error", "message": message}}
    else:
        body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": "forbidden"}}
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": 403,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})
