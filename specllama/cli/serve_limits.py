"""`serve`'s limits on what one socket may hold: header and body timeouts, open connections."""

from __future__ import annotations

import argparse

from specllama.cli.arguments import at_least_one
from specllama.server.limits import ConnectionLimits

DEFAULTS = ConnectionLimits()


def add_connection_limits(g) -> None:
    g.add_argument("--header-timeout", type=_seconds, default=DEFAULTS.header_timeout, metavar="SECONDS",
                   help="a request's line and headers must arrive within this, else 408 and the connection closes "
                        f"(default {DEFAULTS.header_timeout:g})")
    g.add_argument("--body-timeout", type=_seconds, default=DEFAULTS.body_timeout, metavar="SECONDS",
                   help="the longest gap between a request body's bytes, else 408 and the connection closes "
                        f"(default {DEFAULTS.body_timeout:g})")
    g.add_argument("--max-connections", type=at_least_one, default=DEFAULTS.max_connections, metavar="N",
                   help=f"open connections beyond this are answered 503 and closed (default {DEFAULTS.max_connections})")


def connection_limits(args: argparse.Namespace) -> ConnectionLimits:
    return ConnectionLimits(args.header_timeout, args.body_timeout, args.max_connections)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"expected seconds between 0 and 3600, got {text}")
    return value
