"""`specllama serve`: the engine behind an OpenAI-compatible HTTP API (specllama/server/)."""

from __future__ import annotations

import argparse
import os
import sys

from specllama.cli.arguments import add_engine_options, add_model_options, add_status_options, at_least_one, parallel_count
from specllama.cli.serve_limits import add_connection_limits, connection_limits
from specllama.decoding.request import PARALLEL_AUTO_MAX
from specllama.errors import SpecllamaError, UsageError

DEFAULT_PORT = 8080  # llama-server's
DEFAULT_QUEUE = 64
DEFAULT_MAX_BODY = 8 * 1024 * 1024  # an agent's whole conversation with a few files in it fits many times over
DEFAULT_KEEP_ALIVE = 10.0  # seconds: well inside the 30-60 s a client or proxy waits for a byte


HELP = "an OpenAI-compatible HTTP server (chat/completions, completions, models)"
DESCRIPTION = ("One engine for every client: requests are decoded together (continuous batching), re-sent "
               "conversations reuse a slot's cache, and the suffix drafter drafts from every earlier answer. "
               "Sampling and drafter options set the defaults of requests that do not say; --max-tokens is the "
               "most a request gets (larger asks are capped, and the log and usage say so; no --max-tokens: the "
               "rest of the context). See docs/serve.md.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    _add_server_arguments(p)
    add_model_options(p)
    add_engine_options(p)
    add_status_options(p)
    # A client that names no max_tokens gets the rest of the context, as from llama-server.
    p.set_defaults(max_tokens=None)


def _add_server_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("server")
    g.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 for every interface)")
    g.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    g.add_argument("--api-key", metavar="KEY",
                   help="require 'Authorization: Bearer KEY' on every route but /health (default: "
                        "$SPECLLAMA_API_KEY when set, else no key)")
    g.add_argument("--alias", metavar="NAME", help="the model id /v1/models lists (default: the target file's name)")
    g.add_argument("--strict-model", action="store_true",
                   help="answer 404 to a request naming another model id (default: the one model served answers "
                        "any id, as llama-server does; the answer's `model` says which model it was)")
    g.add_argument("--cors", action="append", default=[], metavar="ORIGIN",
                   help="also let web pages from ORIGIN call the API (repeatable; '*' for any; pages from "
                        "http://localhost:* and http://127.0.0.1:* always may; default: only those)")
    g.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="also answer requests whose Host header names NAME (repeatable; '*' for any). A server on a "
                        "loopback address answers only localhost, 127.0.0.1 and [::1] by default, one on another "
                        "address that address too, one on 0.0.0.0 any name: a guard against DNS rebinding")
    g.add_argument("--parallel", type=parallel_count, default="auto", metavar="N|auto",
                   help="requests decoded together (default auto: the number that makes the most tokens/s on what "
                        f"steps cost here, chosen again as they are learnt, at most {PARALLEL_AUTO_MAX}; each holds "
                        "--ctx tokens of cache)")
    g.add_argument("--queue", type=at_least_one, default=DEFAULT_QUEUE, metavar="N",
                   help=f"requests that may wait for a slot; beyond that, 503 with Retry-After (default {DEFAULT_QUEUE})")
    g.add_argument("--max-body", type=at_least_one, default=DEFAULT_MAX_BODY, metavar="BYTES",
                   help=f"the largest request body accepted, else 413 (default {DEFAULT_MAX_BODY})")
    add_connection_limits(g)
    g.add_argument("--keep-alive", type=_keep_alive, default=DEFAULT_KEEP_ALIVE, metavar="SECONDS",
                   help="a stream with nothing to send for this long (a long prompt's prefill, a wait for a slot) "
                        "sends a keep-alive, an event of its API that adds nothing (a chunk with an empty delta; "
                        "Responses' in_progress; Anthropic's ping), so that clients and proxies do not time out; "
                        f"0: never (default {DEFAULT_KEEP_ALIVE:g})")
    c = p.add_argument_group("prompt cache")
    c.add_argument("--cache-ram", type=_mib, default=None, metavar="MiB",
                   help="keep the prompts slots lose (another request took the slot) in this much memory, so a "
                        "long prefix (an agent's system text and tools) is prefilled once (default: a quarter of the "
                        "memory free at start, at most 8192; 0: off)")
    c.add_argument("--cache-disk", type=_mib, default=None, metavar="MiB",
                   help="also keep them on disk, in the user's cache folder, so the next server starts from them "
                        "(default: a tenth of the free disk, at most 8192; 0: off)")


def _bounded(parse, what: str, low: float, high: float | None = None):
    """An argparse type: `parse` the text, refused in one line outside [low, high]."""
    def convert(text: str):
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < low or (high is not None and value > high):
            limits = f"from {low:g} to {high:g}" if high is not None else f"{low:g} or more"
            raise argparse.ArgumentTypeError(f"expected {what} {limits}, got {text}")
        return value
    return convert


_mib = _bounded(int, "a size in MiB", 0)
_keep_alive = _bounded(float, "seconds", 0, 3600)
_port = _bounded(int, "a port number", 0, 65535)


def api_key_from(args: argparse.Namespace) -> str | None:
    """--api-key, else $SPECLLAMA_API_KEY, else None (no key). An empty key is a mistake (an
    unset variable in `--api-key "$KEY"`), not a wish to run open: refused, not ignored."""
    if args.api_key is not None:
        if not args.api_key.strip():
            raise UsageError("--api-key is empty (an unset variable?): give the key, or leave the option out to "
                             "serve without one")
        return args.api_key
    key = os.environ.get("SPECLLAMA_API_KEY")
    if key is not None and not key.strip():
        raise SpecllamaError("SPECLLAMA_API_KEY is set but empty: set it to the key, or unset it to serve without one")
    return key


def run(args: argparse.Namespace) -> int:
    from specllama.cli.batch_common import sigterm_as_interrupt
    from specllama.cli.options import resolved_for, status_lines
    from specllama.cli.progress import download_bar
    from specllama.runtime.loaded import open_runtime
    from specllama.server import ignored
    from specllama.server.app import create_app
    from specllama.server.browser_guard import allowed_hosts
    from specllama.server.exchange import ServerState
    from specllama.server.metrics import Metrics
    from specllama.server.run import bind, serve
    from specllama.server.schema import ServedModel
    from specllama.server.worker import EngineWorker

    status = status_lines(args)
    ignored.VERBOSE = bool(getattr(args, "verbose", False))  # fields a client sends that only tune a hosted service
    resolved = resolved_for(args, status)  # bad sampling options fail before anything loads
    api_key = api_key_from(args)
    sock = bind(args.host, args.port)  # a taken port fails now, not after minutes of loading
    try:
        # Loaded like the chat's: the draft model whenever the pair or --draft names one, so a request
        # may ask for any drafter ("drafter" in its body) without a reload.
        with sigterm_as_interrupt(), download_bar() as progress:
            runtime = open_runtime(resolved.load, resolved.registry, progress=progress, status=status)
        with runtime:
            info = runtime.describe()
            # A request that names no max_tokens runs until the context is full (llama-server's default).
            defaults = resolved.config(max_tokens=resolved.max_tokens or info.n_ctx)
            name = args.alias or info.target.path.stem
            served = ServedModel(name=name, aliases=frozenset({info.target.file, info.target.name}),
                                 n_ctx=info.n_ctx, defaults=defaults, default_max_tokens=resolved.max_tokens,
                                 drafters=runtime.drafters, n_vocab=info.target.n_vocab,
                                 strict_model=args.strict_model)
            metrics = Metrics(runtime.parallelism)
            runtime.warm_tokenizer()  # the vocabulary's special texts read now, not in the first request
            runtime.warm_up()  # and the backend's kernels and the weights, as llama-server does
            cache = prompt_cache_for(runtime, args)
            state = ServerState(runtime, EngineWorker(runtime, args.queue, metrics), served, metrics, args.max_body,
                                keep_alive=args.keep_alive)
            host, port = sock.getsockname()[:2]
            print(f"specllama serve: http://{host}:{port}/v1 · model '{name}' · {info.line(defaults)} · "
                  f"{runtime.parallelism} request(s) decoded together, {args.queue} may wait · drafters "
                  f"{', '.join(runtime.drafters)} (default {defaults.drafter})"
                  + (" · API key required" if api_key else "") + (f" · prompt cache {cache}" if cache else ""),
                  file=sys.stderr, flush=True)
            app = create_app(state, api_key, tuple(args.cors), allowed_hosts(args.host, args.allow_host))
            status = serve(app, state, sock, connection_limits(args))
    finally:
        sock.close()
    print("specllama serve: stopped" + (f" (the engine died: exit status {status})" if status else ""), file=sys.stderr)
    return status


def prompt_cache_for(runtime, args: argparse.Namespace) -> str:
    """Give the engine its prompt cache (runtime/prompt_cache.py); says its bounds ("" when off)."""
    from specllama.dirs import prompt_cache_dir
    from specllama.llama.kv_memory import human_bytes
    from specllama.runtime.prompt_cache import default_disk_bytes, default_ram_bytes

    folder = prompt_cache_dir()
    ram = args.cache_ram << 20 if args.cache_ram is not None else default_ram_bytes()
    disk = args.cache_disk << 20 if args.cache_disk is not None else default_disk_bytes(folder)
    log = lambda text: print("specllama serve: " + text, file=sys.stderr, flush=True)  # noqa: E731
    if runtime.use_prompt_cache(ram, disk, folder if disk else None, log=log) is None:
        return ""
    return f"{human_bytes(ram)} in memory, {human_bytes(disk)} on disk" if disk else f"{human_bytes(ram)} in memory"
