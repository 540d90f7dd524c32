"""Running the app under uvicorn, and stopping it cleanly.

On SIGTERM or Ctrl-C uvicorn stops accepting connections and waits for the open ones; before it
waits, DrainingServer.shutdown stops everything the requests are doing: bodies being read or
prepared (JSON, tokenizing) are answered 503 at once, waiting requests are refused with 503, the
running ones are cancelled after their current step (a long prompt's prefill after its current
chunk), so their streams end with an error event and [DONE] and non-streamed ones get a 503
(which `batch --server` retries elsewhere). A handler still waiting for the engine after
ANSWER_SECONDS answers 503 itself (stopping.py), so every client gets JSON.

Then the models may be freed only once no thread can call into llama.cpp: the engine thread and
the preparing threads are joined, and if one is still inside a native call when STOP_SECONDS
have passed since the signal, the process exits at once without freeing anything (the memory goes
back to the system either way); freeing a model under a running tokenize was the SIGSEGV of
issue 33. uvicorn would re-raise the signal after its own graceful stop (so the process "dies
of" SIGTERM); a server asked to stop that stopped cleanly exits 0 instead. A second Ctrl-C
still forces the exit, as uvicorn does.
"""

from __future__ import annotations

import os
import socket
import sys
import time

import uvicorn

from specllama.errors import SpecllamaError
from specllama.server.exchange import ServerState
from specllama.server.http_limits import guarded_protocol
from specllama.server.limits import ConnectionLimits

ANSWER_SECONDS = 2  # after the signal, the longest a handler waits for the engine's last event
GRACE_SECONDS = 5  # uvicorn's own wait for connections; every handler has answered well before
STOP_SECONDS = 8  # after the signal, the longest to wait for threads inside llama.cpp
ENGINE_DIED = 3  # the exit status when the engine thread died: not a clean stop, so a supervisor restarts it


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
        stop_everything(self.state)
        await super().shutdown(sockets)


def stop_everything(state: ServerState) -> None:
    """Refuse what is new, drop what is being prepared, cancel what runs (on the event loop)."""
    state.draining = True
    state.stopping.begin(ANSWER_SECONDS)
    state.preparer.close()
    state.worker.drain()
    state.runtime.interrupt()


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


def serve(app, state: ServerState, sock: socket.socket, limits: ConnectionLimits = ConnectionLimits()) -> int:
    """Run until SIGTERM / Ctrl-C, or until the engine thread dies; returns the exit status (0 for
    a requested stop, ENGINE_DIED when the engine died: a supervisor should restart the server)
    once no thread uses the models (the caller frees them), or ends the process when one still
    does after STOP_SECONDS."""
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=GRACE_SECONDS,
                            lifespan="off", access_log=False, http=guarded_protocol(limits))
    server = DrainingServer(config, state)
    status = [0]

    def engine_died() -> None:  # on the engine thread: uvicorn's loop sees should_exit within 0.1 s
        status[0] = ENGINE_DIED
        server.should_exit = True

    state.worker.on_death = engine_died
    state.preparer.start()
    state.worker.start()
    try:
        server.run(sockets=[sock])
    finally:
        if not state.draining:  # uvicorn ended without its shutdown (a failed start): stop here
            state.draining = True
            state.preparer.close()
            state.worker.drain()
            state.runtime.interrupt()
        since = state.stopping.since or time.monotonic()
        deadline = since + STOP_SECONDS
        stopped = state.worker.join(max(0.0, deadline - time.monotonic())) and state.preparer.join(deadline)
        if not stopped:
            print(f"specllama serve: a request was still inside llama.cpp {STOP_SECONDS} s after the stop; exiting "
                  "without freeing the models", file=sys.stderr, flush=True)
            sys.stdout.flush()
            os._exit(status[0])
    return status[0]
