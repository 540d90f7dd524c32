"""uvicorn's HTTP/1.1 protocol with the limits a server facing untrusted sockets needs.

uvicorn (0.30 to 0.54 at least) times out only idle keep-alive connections: a socket that never
finishes its headers, or announces 1,000 body bytes and sends 9, stays open for good, and any
number of them are accepted (issue 33: 3,000 idle sockets, 75 s and counting). Its options
(`limit_concurrency`, `h11_max_incomplete_event_size`) answer requests, not sockets. So this
subclass of its h11 protocol adds, per connection:

- a header timeout: the request line and headers must be complete within `header_timeout`
  seconds of the connection (or of their first byte on a kept-alive one), else 408 and close;
- a body timeout: no gap longer than `body_timeout` seconds between body bytes (time the server
  itself stops reading, when the handler is behind, does not count), else 408 and close;
- a connection cap: past `max_connections` open sockets a new one gets 503 and is closed;
- half-closed clients answered: a client that shuts down its sending side after the request
  (`nc -N`, some scripts) used to be closed without an answer, since uvicorn returns False from
  eof_received. The connection now stays open for the answer. A client that closed its socket
  entirely sends the same end-of-file, though, and its request must be cancelled at once: so
  while such a request waits for its answer, an interim `100 Continue` response (which HTTP/1.1
  clients must accept and skip) is written every PROBE_SECONDS; to a closed socket the second one
  fails, uvicorn sees the connection lost, and the handler cancels the request as for any client
  that leaves. A stream whose response has begun cannot take an interim response; when it has
  nothing to send (a long prompt's prefill, a wait for the slot) its own writes came only every
  --keep-alive seconds, so a closed client was seen at the second of them, 20 s later, while its
  prefill held the slot (an agent that gave up and retried waited behind itself). An event stream
  (the exchange marks its scope: EVENT_STREAM) is probed with SSE comments instead, which every
  client's parser skips: PROBES_IN_STREAM of them, after which a client still there is a live
  half-closed one, and the stream's keep-alives go on telling as before.

The h11 states used (their_state IDLE / SEND_BODY / DONE) are h11's public API; the hooks are
uvicorn's protocol methods, which these tests pin: tests/integration/test_serve_timeouts.py.
"""

from __future__ import annotations

import asyncio
import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from specllama.server.limits import ConnectionLimits

PROBE_SECONDS = 0.25
PROBES_IN_STREAM = 3  # a closed socket answers the first write with a reset, and the next write fails
PROBE_COMMENT = b": probe\n\n"
EVENT_STREAM = "specllama.event_stream"  # a scope key: the response is server-sent events (exchange.py sets it)


def guarded_protocol(limits: ConnectionLimits) -> type[H11Protocol]:
    """The protocol class uvicorn instantiates per connection (Config(http=...)), with `limits`."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"limits": limits})


def _raw_response(status: int, reason: str, message: str, extra: str = "") -> bytes:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error" if status < 500 else "server_error",
                                 "param": None, "code": None}}).encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            f"connection: close\r\n{extra}\r\n").encode() + body


class GuardedH11Protocol(H11Protocol):
    limits = ConnectionLimits()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        self._waiting_for = ""  # "headers", "body" or "": what the deadline is for
        self._half_closed = False
        if len(self.connections) > self.limits.max_connections:
            transport.write(_raw_response(503, "Service Unavailable", "too many open connections; try again shortly",
                                          "retry-after: 1\r\n"))
            transport.close()
            return
        self._arm("headers")  # a new connection owes its first request's headers

    def connection_lost(self, exc: Exception | None) -> None:
        self._arm("")
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()
        if self._half_closed and not self.transport.is_closing():  # its answer is written: nothing more comes
            self.transport.close()

    def _watch(self) -> None:
        """The deadline the connection's state calls for, after each event."""
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            self._arm("body")  # every arrival restarts it: it bounds the gaps
        elif state is not h11.IDLE:
            self._arm("")  # the whole request is in: the rest is the server's time
        elif self.conn.trailing_data[0]:
            if self._waiting_for != "headers":  # a kept-alive connection's next request has begun
                self._arm("headers")
        elif self._waiting_for == "body":
            self._arm("")  # between requests uvicorn's keep-alive timeout closes an idle connection

    def _arm(self, what: str) -> None:
        if getattr(self, "_deadline", None) is not None:
            self._deadline.cancel()
        self._waiting_for = what
        seconds = {"headers": self.limits.header_timeout, "body": self.limits.body_timeout}.get(what)
        self._deadline = self.loop.call_later(seconds, self._late) if seconds is not None else None

    def _late(self) -> None:
        what, self._deadline = self._waiting_for, None
        if self.transport.is_closing():
            return
        state = self.conn.their_state
        if what == "headers" and state is h11.IDLE:
            message = f"the request's headers did not arrive within {self.limits.header_timeout:g} s"
        elif what == "body" and state is h11.SEND_BODY:
            if self.flow.read_paused:  # the server stopped reading (its handler is behind), not the client
                self._arm("body")
                return
            message = f"no request body bytes arrived for {self.limits.body_timeout:g} s"
            if self.cycle is not None and self.cycle.response_started:
                message = ""
        else:
            return
        if message:  # written raw: h11 sends no response before a request's headers are in
            self.transport.write(_raw_response(408, "Request Timeout", message))
        self.transport.close()  # the handler, if any, sees the client gone

    def eof_received(self) -> bool | None:
        """True keeps the transport open for writing (asyncio's protocol contract)."""
        cycle = self.cycle
        if cycle is None or cycle.response_complete or self.conn.their_state is not h11.DONE:
            return None  # nothing awaits an answer, or the request was cut short: close, as uvicorn does
        if not self._half_closed:
            self._half_closed = True
            if self.scope.get("http_version") == "1.1":  # interim responses may not go to HTTP/1.0 clients
                self.loop.call_later(PROBE_SECONDS, self._probe_client)
        return True

    def _probe_client(self, in_stream: int = 0) -> None:
        cycle = self.cycle
        if cycle is None or cycle.response_complete or self.transport.is_closing():
            return
        if not cycle.response_started:
            self.transport.write(self.conn.send(h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")))
        elif cycle.scope.get(EVENT_STREAM) and self.conn.our_state is h11.SEND_BODY and in_stream < PROBES_IN_STREAM:
            # between two of the stream's events: the app writes each whole, on this same thread
            self.transport.write(self.conn.send(h11.Data(data=PROBE_COMMENT)))
            in_stream += 1
        else:
            return  # a whole answer being written, or a live half-closed stream: their own writes tell
        self.loop.call_later(PROBE_SECONDS, self._probe_client, in_stream)
