"""A request body's bytes as JSON, every failure a 400 (never a 500 with a traceback)."""

from __future__ import annotations

import json

from specllama.server.api_errors import invalid


def body_json(raw: bytes) -> object:
    """Python's JSON decoder recurses once per nesting level, so a body of ten thousand `[` raised
    RecursionError: a 500 and a traceback logged twice before this caught it."""
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise invalid(f"the request body is not valid JSON: {e}") from None
    except RecursionError:
        raise invalid("the request body nests arrays or objects too deeply") from None
