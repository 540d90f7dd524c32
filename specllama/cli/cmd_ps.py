"""`specllama ps`: what a running server has loaded, its slots and its speed (like `ollama ps`).

Read over HTTP from the server's own endpoints, so it works for any `specllama serve` (and shows
what it can of a llama.cpp llama-server): /health (status, slots, requests active and queued),
/props (the model files, context, slots) and /metrics (tokens per second over the last seconds,
tokens generated, drafts accepted by drafter). Nothing is loaded here.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

from specllama.errors import SpecllamaError
from specllama.llama.kv_memory import human_bytes

HELP = "what a running `specllama serve` has loaded, its slots and its speed"
DESCRIPTION = """Asks a running server (specllama serve, or llama.cpp's llama-server) over HTTP: its model files,
context, slots (active and queued requests), tokens per second over the last seconds, tokens
generated and drafts accepted. The API key, when the server wants one, comes from --api-key or
$SPECLLAMA_API_KEY."""

DEFAULT_URL = "http://127.0.0.1:8080"
ASK_TIMEOUT = 5.0  # seconds: a server that cannot say how it is within this is not answering
_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)$')


class NoServerError(SpecllamaError):
    """Nothing usable answered at the address."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=DEFAULT_URL, help=f"the server's address (default: {DEFAULT_URL})")
    p.add_argument("--api-key", help="the server's API key (default: $SPECLLAMA_API_KEY, else none)")
    p.add_argument("--json", action="store_true", help="print one JSON object (default: a few lines of text)")


def parse_metrics(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Prometheus' text format -> name -> [(labels, value)] (comments and malformed lines skipped)."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line.strip())
        if not m or line.startswith("#"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        try:
            out.setdefault(m.group(1), []).append((labels, float(m.group(3))))
        except ValueError:
            continue
    return out


def ask(url: str, api_key: str | None) -> dict:
    """Everything the server says about itself, as one dict (empty parts it did not answer)."""
    from specllama.batch.server_client import ServerClient, ServerError, ServerUrlError

    try:
        client = ServerClient(url, api_key=api_key, timeout=ASK_TIMEOUT)
    except ServerUrlError as e:
        raise NoServerError(str(e).replace("--server", "--url")) from None
    try:
        status, _, body = client.request("GET", "/health")
        if status == 401:
            raise NoServerError(f"{url} wants an API key: --api-key KEY or $SPECLLAMA_API_KEY")
        health = _json(body)
        if not isinstance(health, dict) or "status" not in health:
            raise NoServerError(f"{url} answered /health with HTTP {status} but not as a server does")
        props = client.get_json("/props") or {}
        code, _, text = client.request("GET", "/metrics")
        if code == 401 and props == {}:
            raise NoServerError(f"{url} wants an API key for /props and /metrics: --api-key KEY or $SPECLLAMA_API_KEY")
        metrics = parse_metrics(text.decode("utf-8", "replace")) if code == 200 else {}
    except ServerError as e:
        raise NoServerError(f"no server answers at {url} ({e}); start one with `specllama serve`") from None
    finally:
        client.close()
    return {"url": url, "health": health, "props": props if isinstance(props, dict) else {}, "metrics": metrics}


def _json(data: bytes):
    try:
        return json.loads(data)
    except ValueError:
        return None


def _one(metrics: dict, *names: str) -> float | None:
    for name in names:
        if metrics.get(name):
            return sum(v for _, v in metrics[name])
    return None


def summary(seen: dict) -> dict:
    """What `ps` shows, from specllama's names or llama-server's (`llamacpp:`) where they differ."""
    health, props, metrics = seen["health"], seen["props"], seen["metrics"]
    generation = props.get("default_generation_settings") or {}  # llama-server keeps n_ctx there
    drafted = {lab.get("source", "?"): v for lab, v in metrics.get("specllama_draft_tokens_total", [])}
    accepted = {lab.get("source", "?"): v for lab, v in metrics.get("specllama_draft_tokens_accepted_total", [])}
    return {
        "url": seen["url"],
        "status": health.get("status"),
        "model": props.get("model_path"),
        "draft": props.get("draft_model_path"),
        "n_ctx": props.get("n_ctx") or generation.get("n_ctx"),
        "drafters": props.get("drafters"),
        "slots": props.get("total_slots") or health.get("slots"),
        "active": health.get("active", _one(metrics, "llamacpp:requests_processing")),
        "queued": health.get("queued", _one(metrics, "llamacpp:requests_deferred")),
        "tokens_per_s": _one(metrics, "specllama_tokens_per_second", "llamacpp:predicted_tokens_seconds"),
        "tokens_generated": _one(metrics, "specllama_generated_tokens_total", "llamacpp:tokens_predicted_total"),
        "requests": {lab.get("outcome", "?"): int(v) for lab, v in metrics.get("specllama_requests_total", [])},
        "drafts": {s: {"drafted": int(drafted[s]), "accepted": int(accepted.get(s, 0))} for s in drafted},
        "prompt_cache": _prompt_cache(metrics),
    }


def _prompt_cache(metrics: dict) -> dict | None:
    """The prompt cache's series by where (memory, disk), None when the server has none."""
    if "specllama_prompt_cache_entries" not in metrics:
        return None
    out: dict = {}
    for name in ("entries", "bytes", "limit_bytes", "hits_total", "tokens_total"):
        for labels, value in metrics.get(f"specllama_prompt_cache_{name}", []):
            out.setdefault(labels.get("where", "?"), {})[name.removesuffix("_total")] = int(value)
    return out


def text(s: dict) -> str:
    def name(path: str | None) -> str:
        return Path(path).name if path else "-"

    lines = [f"{s['url']}  {s['status']}"]
    lines.append(f"model      {name(s['model'])}" + (f"  (draft {name(s['draft'])})" if s["draft"] else ""))
    if s["n_ctx"]:
        lines.append(f"context    {int(s['n_ctx']):,} tokens a slot")
    if s["slots"] is not None:
        busy = [f"{int(s[k])} {k}" for k in ("active", "queued") if s[k] is not None]
        lines.append(f"slots      {int(s['slots'])}" + (f" ({', '.join(busy)})" if busy else ""))
    if s["tokens_per_s"] is not None:
        total = f"; {int(s['tokens_generated']):,} tokens since start" if s["tokens_generated"] is not None else ""
        lines.append(f"speed      {s['tokens_per_s']:.1f} tok/s now{total}")
    if s["requests"]:
        lines.append("requests   " + ", ".join(f"{n} {k}" for k, n in sorted(s["requests"].items())))
    if s["drafts"]:
        lines.append("drafts     " + ", ".join(
            f"{src} {d['accepted']}/{d['drafted']} accepted" for src, d in sorted(s["drafts"].items())))
    if s["drafters"]:
        lines.append(f"drafters   {', '.join(s['drafters'])}")
    for where, c in (s.get("prompt_cache") or {}).items():
        if c.get("limit_bytes"):
            lines.append(f"cache      {where}: {c.get('entries', 0)} prompt(s), {human_bytes(c.get('bytes', 0))} of "
                         f"{human_bytes(c['limit_bytes'])}; {c.get('hits', 0)} hit(s), "
                         f"{c.get('tokens', 0):,} tokens not prefilled")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    api_key = args.api_key or os.environ.get("SPECLLAMA_API_KEY") or None
    shown = summary(ask(args.url, api_key))
    print(json.dumps(shown, indent=1) if args.json else text(shown))
    return 0 if shown["status"] in ("ok", "busy") else 1
