"""Running the app under uvicorn, and stopping it cleanly.

On SIGTERM or Ctrl-C uvicorn stops accepting connections and waits for the open ones; before it
waits, the worker is drained (DrainingServer.shutdown): waiting requests are refused with 503, the
running ones are cancelled after their current step, so their streams end with an error event and
[DONE] and non-streamed ones get a 503 (which `batch --server` retries elsewhere). Then the engine
thread ends, the models are freed and the process exits 0. uvicorn would re-raise the signal after
its own graceful stop (so the process "dies of" SIGTERM); a server asked to stop that stopped
cleanly exits 0 instead. A second Ctrl-C still forces the exit, as uvicorn does.
"""

from __future__ import annotations

import socket
import sys

import uvicorn

from specllama.errors import SpecllamaError
from specllama.server.app import ServerState

GRACE_SECONDS = 5  # the longest uvicorn waits for connections once every request was cancelled
ENGINE_JOIN_SECONDS = 30  # a long prompt's prefill is one decode the engine cannot interrupt


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, state: ServerState):
        super().__init__(config)
        self.state = state

    def handle_exit(self, sig, frame) -> None:
        super().handle_exit(sig, frame)
        captured = getattr(self, "_captured_signals", None)  # uvicorn >= 0.29 re-raises what it captured
        if isinstance(captured, list):
            captured.clear()  # stopped on request: exit 0, do not die of the signal afterwards

    async def shutdown(self, sockets=None) -> None:
        self.state.draining = True
        self.state.worker.drain()
        await super().shutdown(sockets)


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, opened before the models load, so a taken port fails in a second."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise SpecllamaError(f"--host {host}: {e.strerror}") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        raise SpecllamaError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.set_inheritable(True)
    return sock


def serve(app, state: ServerState, sock: socket.socket) -> None:
    """Run until SIGTERM / Ctrl-C; returns once the engine thread has ended."""
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=GRACE_SECONDS,
                            lifespan="off", access_log=False)
    server = DrainingServer(config, state)
    state.worker.start()
    try:
        server.run(sockets=[sock])
    finally:
        state.draining = True
        state.worker.drain()
        if not state.worker.join(ENGINE_JOIN_SECONDS):
            print("specllama serve: the engine did not stop in time", file=sys.stderr)
