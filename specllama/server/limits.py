"""What one socket may hold (http_limits.py enforces it; `serve --header-timeout` etc. set it). Apart from
http_limits.py because every CLI command imports these values and that module imports uvicorn (80 ms)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConnectionLimits:
    # nginx waits 60 s for headers and between body reads, Apache's mod_reqtimeout 20 s: a client
    # on 127.0.0.1 or a LAN sends a request's headers in milliseconds and its body at network speed.
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    # Below the usual 1,024 open files, so the server refuses sockets before the system refuses it.
    max_connections: int = 512
